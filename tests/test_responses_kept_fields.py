"""What the Responses API adapter keeps that has no field of its own, and what a failed
response still reports.

- The annotations of `output_text` parts (citations of URLs, files and container files,
  file paths), verbatim under `provider_data["openai_responses"]["annotations"]`, each list
  by the position of the text block its part became; streamed, the same list, whether the
  annotations came as `response.output_text.annotation.added` events, in finished parts, or
  both (once each), and however the bytes are split.
- The usage of a `response.failed` stream (or of a terminal response whose status is
  `failed`), yielded before its error, so that the collector of a failed stream holds it,
  sync and async; that of `response.incomplete`; and the body of a failed response, which
  raises its error and has nowhere to keep its usage.
- A replay of the recorded Responses API traffic under `ALLAMA_CORPUS_DIR` (default
  `../shared/corpus/cases` next to the repository), with expectations read from the
  recordings alone.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import allama
from _responses_support import sse, stream_of
from allama import ExtractionMetadata
from allama.adapters.openai_responses import ANNOTATIONS_KEY, ITEMS_KEY, NAMESPACE
from allama.adapters.openai_responses._decode import decode_object, decode_response
from allama.adapters.openai_responses._sse import ResponsesStreamDecoder, decode_stream
from allama.errors import REPORTED_USAGE_KEY, Error, RateLimitedError, ServerError
from allama.providers import provider as make_provider
from allama.stream import AsyncChatStream, ChatStream, StreamCollector
from allama.transport import Transport
from allama.types import (
    ChatRequest,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    Refusal,
    StreamEvent,
    TextPart,
    ToolCall,
    Usage,
    UsageEvent,
)
from test_responses_decode import collect, decode, feed_split

# Helpers


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_k",
        "object": "response",
        "created_at": 1_766_000_000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "usage": {
            "input_tokens": 40,
            "input_tokens_details": {"cached_tokens": 8},
            "output_tokens": 25,
            "output_tokens_details": {"reasoning_tokens": 5},
            "total_tokens": 65,
        },
    }
    return {**base, **fields}


USAGE = Usage(input_tokens=40, output_tokens=25, reasoning_tokens=5, cache_read_tokens=8)


def events_of(data: bytes) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event: `data:` lines joined, events split at blank
    lines; `[DONE]` and comment lines left out."""
    events: list[dict[str, Any]] = []
    lines: list[str] = []
    for line in [*data.decode().splitlines(), ""]:
        if not line:
            joined = "\n".join(lines)
            if joined and joined != "[DONE]":
                events.append(json.loads(joined))
            lines = []
        elif line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
    return events


def openai_stream_of(body: dict[str, Any], *, annotation_events: bool = True) -> bytes:
    """A response streamed as OpenAI streams it with annotations: each text part announced
    with none (`response.content_part.added`), then, after its deltas, one
    `response.output_text.annotation.added` for each of its annotations (unless
    `annotation_events` is false), then its finished part with all of them, which the
    item's `done` and the final response repeat."""
    out: list[dict[str, Any]] = []
    for event in events_of(stream_of(body)):
        part = event.get("part")
        text = isinstance(part, dict) and part.get("type") == "output_text"
        if event["type"] == "response.content_part.added" and text:
            event = {**event, "part": {**part, "annotations": []}}
        if event["type"] == "response.content_part.done" and text and annotation_events:
            where = {k: event[k] for k in ("item_id", "output_index", "content_index")}
            out.extend(
                {
                    "type": "response.output_text.annotation.added",
                    **where,
                    "annotation_index": position,
                    "annotation": annotation,
                }
                for position, annotation in enumerate(part.get("annotations") or [])
            )
        out.append(event)
    return sse(*out)


def annotation_values(events: Iterable[StreamEvent]) -> list[Any]:
    return [
        event.value
        for event in events
        if isinstance(event, ProviderDataEvent) and event.key == ANNOTATIONS_KEY
    ]


# A response with annotated text in several parts of several messages, between reasoning,
# a function call and an item allama has no type for.

URL = {
    "type": "url_citation",
    "start_index": 0,
    "end_index": 5,
    "url": "https://fr.wikipedia.org/wiki/Paris",
    "title": "Paris — Wikipédia",
}
URL_2 = {
    "type": "url_citation",
    "start_index": 24,
    "end_index": 30,
    "url": "https://en.wikipedia.org/wiki/France",
    "title": "France",
}
FILE = {"type": "file_citation", "file_id": "file-abc", "filename": "notes.pdf", "index": 9}
CONTAINER = {
    "type": "container_file_citation",
    "container_id": "cntr_1",
    "file_id": "cfile_1",
    "filename": "plot.png",
    "start_index": 4,
    "end_index": 12,
}
FILE_PATH = {"type": "file_path", "file_id": "file-out", "index": 3}
WEB_SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "capital of France"},
}
TEXT_1 = "Paris is the capital of France."
TEXT_3 = "See the plot in your notes."


def text_part(text: str, *annotations: dict[str, Any]) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": list(annotations), "logprobs": []}


ANNOTATED = response(
    [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Look it up."}],
        },
        WEB_SEARCH,
        {
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                text_part(TEXT_1, URL, URL_2),
                {"type": "refusal", "refusal": "Not the rest."},
                text_part(" No source here."),
                text_part(TEXT_3, FILE, CONTAINER),
            ],
        },
        {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_1",
            "name": "plot",
            "arguments": '{"x":1}',
        },
        {
            "id": "msg_2",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [text_part("Saved to out.csv.", FILE_PATH)],
        },
    ]
)
CONTENT = (
    Reasoning(text="Look it up.", signature="rs_1"),
    TextPart(text=TEXT_1),
    Refusal(text="Not the rest."),
    TextPart(text=" No source here."),
    TextPart(text=TEXT_3),
    ToolCall(id="call_1", name="plot", arguments='{"x":1}'),
    TextPart(text="Saved to out.csv."),
)
KEPT = [
    {"index": 1, "annotations": [URL, URL_2]},
    {"index": 4, "annotations": [FILE, CONTAINER]},
    {"index": 6, "annotations": [FILE_PATH]},
]


# Bodies


def test_annotations_are_kept_by_the_position_of_their_text_block() -> None:
    decoded = decode(ANNOTATED)
    assert decoded.content == CONTENT
    # The web search call that followed the reasoning is kept with where it stood.
    following = [{"type": "web_search_call", "id": None}, *[None] * 6]
    assert decoded.provider_data == {
        NAMESPACE: {
            ITEMS_KEY: [WEB_SEARCH],
            ANNOTATIONS_KEY: KEPT,
            "resume": {"following": following},
        }
    }
    # Each part is a text block of its own: its indexes count in that block's text.
    first = decoded.content[1]
    assert isinstance(first, TextPart)
    assert first.text[URL["start_index"] : URL["end_index"]] == "Paris"
    assert first.text[URL_2["start_index"] : URL_2["end_index"]] == "France"
    third = decoded.content[4]
    assert isinstance(third, TextPart)
    assert third.text[CONTAINER["start_index"] : CONTAINER["end_index"]] == "the plot"
    assert decoded.text() == TEXT_1 + " No source here." + TEXT_3 + "Saved to out.csv."
    assert decoded.finish_reason == FinishReason.TOOL_CALLS and decoded.usage == USAGE


def test_an_annotation_kind_nobody_knows_is_kept_as_sent() -> None:
    odd = {"type": "brand_new_citation", "span": [1, 2], "extra": {"k": None}}
    body = response([{"type": "message", "role": "assistant", "content": [text_part("ab", odd)]}])
    assert decode(body).provider_data == {
        NAMESPACE: {ANNOTATIONS_KEY: [{"index": 0, "annotations": [odd]}]}
    }


@pytest.mark.parametrize(
    "part",
    [
        text_part("No citations."),
        {"type": "output_text", "text": "No list at all."},
        {"type": "output_text", "text": "A null list.", "annotations": None},
    ],
    ids=["empty", "missing", "null"],
)
def test_no_annotations_no_key(part: dict[str, Any]) -> None:
    message = {"type": "message", "role": "assistant", "content": [part]}
    assert decode(response([message])).provider_data == {}
    assert decode(response([message, WEB_SEARCH])).provider_data == {
        NAMESPACE: {ITEMS_KEY: [WEB_SEARCH]}
    }


# Streams


def test_a_streamed_response_collects_to_what_its_body_decodes_to() -> None:
    data = openai_stream_of(ANNOTATED)
    # Each annotation is announced once by an event and again by its finished part.
    kinds = [event["type"] for event in events_of(data)]
    assert kinds.count("response.output_text.annotation.added") == 5
    events = decode_stream(data)
    collected = collect(events)
    assert collected == decode(ANNOTATED)
    assert collected.provider_value(NAMESPACE, ANNOTATIONS_KEY) == KEPT
    # The whole list so far at each annotation the events added, and nothing again when the
    # finished parts (and the final response) said the same.
    assert annotation_values(events) == [
        [{"index": 1, "annotations": [URL]}],
        [{"index": 1, "annotations": [URL, URL_2]}],
        [{"index": 1, "annotations": [URL, URL_2]}, {"index": 4, "annotations": [FILE]}],
        KEPT[:2],
        KEPT,
    ]


def test_finished_parts_alone_give_the_same_annotations() -> None:
    """No `annotation.added` events: the `done` events and the final response say it all;
    or parts announced with their annotations already."""
    events = decode_stream(openai_stream_of(ANNOTATED, annotation_events=False))
    assert collect(events) == decode(ANNOTATED)
    # One report per finished part that has annotations: at its `content_part.done`.
    assert annotation_values(events) == [KEPT[:1], KEPT[:2], KEPT]
    events = decode_stream(stream_of(ANNOTATED))
    assert collect(events) == decode(ANNOTATED)
    assert annotation_values(events) == [KEPT[:1], KEPT[:2], KEPT]
    done_only = sse(
        *(
            {"type": "response.output_item.done", "output_index": index, "item": item}
            for index, item in enumerate(ANNOTATED["output"])
        ),
        {"type": "response.completed", "response": ANNOTATED},
    )
    assert collect(decode_stream(done_only)) == decode(ANNOTATED)
    final_only = sse({"type": "response.completed", "response": ANNOTATED})
    assert collect(decode_stream(final_only)) == decode(ANNOTATED)


MESSAGE = {
    "id": "msg_a",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [text_part(TEXT_1, URL, URL_2)],
}
AT = {"item_id": "msg_a", "output_index": 0, "content_index": 0}
OPENING = (
    {"type": "response.created", "response": {"id": "resp_k", "model": "gpt-5", "output": []}},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**MESSAGE, "status": "in_progress", "content": []},
    },
    {"type": "response.content_part.added", **AT, "part": text_part("")},
    {"type": "response.output_text.delta", **AT, "delta": TEXT_1},
)


def added(position: int | None, annotation: Any, **where: Any) -> dict[str, Any]:
    event = {"type": "response.output_text.annotation.added", **AT, **where}
    if position is not None:
        event["annotation_index"] = position
    return {**event, "annotation": annotation}


def test_the_finished_part_is_authoritative() -> None:
    """Events out of order, repeated, or changed later: the finished part's list wins, and
    nothing is kept twice."""
    stale = {**URL_2, "title": "draft"}
    body = response([MESSAGE])
    data = sse(
        *OPENING,
        added(1, stale),
        added(0, URL),
        added(0, URL),
        {"type": "response.content_part.done", **AT, "part": MESSAGE["content"][0]},
        added(2, FILE),  # after its part finished: the finished part said it all
        {"type": "response.output_item.done", "output_index": 0, "item": MESSAGE},
        {"type": "response.completed", "response": body},
    )
    events = decode_stream(data)
    assert annotation_values(events) == [
        [{"index": 0, "annotations": [stale]}],
        [{"index": 0, "annotations": [URL, stale]}],
        [{"index": 0, "annotations": [URL, URL_2]}],
    ]
    assert collect(events) == decode(body)


def test_the_final_response_has_the_last_word() -> None:
    """A list the final response changes (and even empties) is the final response's."""
    first = {**MESSAGE, "content": [text_part(TEXT_1, URL)]}
    for final, expected in [
        (MESSAGE, [{"index": 0, "annotations": [URL, URL_2]}]),
        ({**MESSAGE, "content": [text_part(TEXT_1)]}, []),
    ]:
        body = response([final])
        data = sse(
            *OPENING,
            added(0, URL),
            {"type": "response.output_item.done", "output_index": 0, "item": first},
            {"type": "response.completed", "response": body},
        )
        collected = collect(decode_stream(data))
        assert collected.provider_value(NAMESPACE, ANNOTATIONS_KEY) == expected
        assert collected.content == decode(body).content


def test_annotation_events_without_an_index_or_a_place() -> None:
    """Without `annotation_index`, after the others; naming no open message item, or a
    refusal part, left to the finished part (which, here, the final response lacks)."""
    refusal_at = {**AT, "content_index": 1}
    data = sse(
        *OPENING,
        added(None, URL),
        added(None, URL_2),
        added(0, FILE, output_index=7, item_id="msg_x"),
        {"type": "response.output_text.annotation.added", "annotation": FILE},
        {"type": "response.content_part.added", **refusal_at, "part": {"type": "refusal"}},
        added(0, FILE, content_index=1),
        added(2, None),
        {"type": "response.completed", "response": response([])},
    )
    collected = collect(decode_stream(data))
    assert collected.provider_data == {
        NAMESPACE: {ANNOTATIONS_KEY: [{"index": 0, "annotations": [URL, URL_2]}]}
    }
    assert collected.content == (TextPart(text=TEXT_1), Refusal(text=""))


def test_annotations_that_arrived_stay_readable_after_an_error() -> None:
    error = {"type": "error", "code": "server_error", "message": "The server had an error"}
    data = sse(*OPENING, added(0, URL), error)
    decoder = ResponsesStreamDecoder(provider="openai")
    stream = ChatStream(itertools.chain(decoder.feed(data), decoder.close()), provider="openai")
    with pytest.raises(ServerError):
        stream.response()
    partial = stream.collector.partial_response()
    assert partial.content == (TextPart(text=TEXT_1),)
    assert partial.provider_data == {
        NAMESPACE: {ANNOTATIONS_KEY: [{"index": 0, "annotations": [URL]}]}
    }


# Any response with annotations, streamed with or without `annotation.added` events and
# split anywhere, collects to what its body decodes to.

_annotations = st.lists(
    st.sampled_from([URL, URL_2, FILE, CONTAINER, FILE_PATH, {"type": "new", "n": 1}]),
    max_size=3,
)
_text_parts = st.builds(
    lambda text, annotations: text_part(text, *annotations),
    st.text(max_size=12),
    _annotations,
)
_parts = st.one_of(
    _text_parts,
    _text_parts,
    st.builds(lambda text: {"type": "refusal", "refusal": text}, st.text(max_size=8)),
)
_item_ids = st.text("abc0123", min_size=1, max_size=6)
_items = st.one_of(
    st.builds(
        lambda i, parts: {
            "id": f"msg_{i}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": parts,
        },
        _item_ids,
        st.lists(_parts, max_size=3),
    ),
    st.builds(
        lambda i, text: {
            "id": f"rs_{i}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
        },
        _item_ids,
        st.text(max_size=8),
    ),
    st.builds(
        lambda i: {
            "id": f"fc_{i}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"call_{i}",
            "name": "f",
            "arguments": "{}",
        },
        _item_ids,
    ),
    st.just(WEB_SEARCH),
)


@settings(max_examples=100, deadline=None)
@given(
    output=st.lists(_items, max_size=5),
    how=st.sampled_from(["events", "finished parts", "announced parts"]),
    data=st.data(),
)
def test_any_annotated_response_streamed_and_split_anywhere_collects_to_its_body(
    output: list[dict[str, Any]], how: str, data: st.DataObject
) -> None:
    body = response(output)
    if how == "announced parts":
        raw = stream_of(body)
    else:
        raw = openai_stream_of(body, annotation_events=how == "events")
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    assert collect(feed_split(raw, cuts)) == decode(body)


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(0, len(openai_stream_of(ANNOTATED))), max_size=40))
def test_the_annotated_stream_split_anywhere(cuts: list[int]) -> None:
    collected = collect(feed_split(openai_stream_of(ANNOTATED), cuts))
    assert collected == decode(ANNOTATED)
    assert collected.provider_value(NAMESPACE, ANNOTATIONS_KEY) == KEPT


def test_one_byte_at_a_time() -> None:
    raw = openai_stream_of(ANNOTATED)
    assert collect(feed_split(raw, range(len(raw)))) == decode(ANNOTATED)


# Failed and incomplete responses: the usage they report


FAILED_USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 127,
}
FAILED = {
    "id": "resp_f",
    "object": "response",
    "status": "failed",
    "model": "gpt-5-2025-08-07",
    "error": {"code": "server_error", "message": "The model failed mid-way"},
    "output": [],
    "usage": FAILED_USAGE,
}
KEPT_USAGE = Usage(input_tokens=120, output_tokens=7, reasoning_tokens=0, cache_read_tokens=100)
BEFORE_FAILURE = (
    *OPENING[:2],
    {"type": "response.content_part.added", **AT, "part": text_part("")},
    {"type": "response.output_text.delta", **AT, "delta": "Par"},
)


def failed_stream(terminal: str = "response.failed") -> bytes:
    return sse(*BEFORE_FAILURE, {"type": terminal, "response": FAILED})


def test_a_failed_stream_yields_its_usage_before_its_error() -> None:
    decoder = ResponsesStreamDecoder(provider="openai")
    seen: list[StreamEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in decoder.feed(failed_stream()):
            seen.append(event)
    assert seen[-1] == UsageEvent(usage=KEPT_USAGE)
    assert caught.value.provider == "openai" and caught.value.retryable


@pytest.mark.parametrize("terminal", ["response.failed", "response.completed"])
@pytest.mark.parametrize(
    "failed",
    [{**FAILED, "usage": None}, {k: v for k, v in FAILED.items() if k != "usage"}],
    ids=["null", "absent"],
)
def test_a_failed_stream_without_usage_yields_none(terminal: str, failed: dict[str, Any]) -> None:
    data = sse(*BEFORE_FAILURE, {"type": terminal, "response": failed})
    decoder = ResponsesStreamDecoder()
    with pytest.raises(ServerError):
        for event in decoder.feed(data):
            assert not isinstance(event, UsageEvent)


def _provider(data: bytes, status: int = 200) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        kind = "text/event-stream" if b"event: " in data else "application/json"
        return httpx2.Response(status, headers={"content-type": kind}, content=data)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return make_provider(
        "openai", api="responses", api_key="k", base_url="http://test", transport=transport
    )


REQUEST = ChatRequest("gpt-5").user("What is the capital of France?")


def _check_failed(collector: StreamCollector, error: Error) -> None:
    assert type(error) is ServerError and collector.error is error
    assert collector.response_metadata().usage == KEPT_USAGE
    partial = collector.partial_response()
    assert partial.usage == KEPT_USAGE
    assert partial.text() == "Par" and partial.finish_reason is None


@pytest.mark.parametrize("terminal", ["response.failed", "response.completed"])
def test_a_failed_stream_keeps_its_usage_sync(terminal: str) -> None:
    with _provider(failed_stream(terminal)) as target:
        stream = target.chat_stream(REQUEST)
        with pytest.raises(ServerError) as caught:
            stream.response()
        _check_failed(stream.collector, caught.value)


@pytest.mark.parametrize("terminal", ["response.failed", "response.completed"])
def test_a_failed_stream_keeps_its_usage_async(terminal: str) -> None:
    async def run() -> tuple[StreamCollector, Error]:
        async with _provider(failed_stream(terminal)) as target:
            stream = await target.achat_stream(REQUEST)
            async with stream:
                try:
                    await stream.response()
                except Error as error:
                    return stream.collector, error
        raise AssertionError("the stream did not fail")

    _check_failed(*asyncio.run(run()))


def test_the_stream_wrappers_keep_the_usage_of_a_failed_stream() -> None:
    """The same through `ChatStream` and `AsyncChatStream` over the decoder alone."""

    def events() -> Iterator[StreamEvent]:
        decoder = ResponsesStreamDecoder()
        yield from decoder.feed(failed_stream())
        yield from decoder.close()

    async def aevents() -> AsyncIterator[StreamEvent]:
        for event in events():
            yield event

    stream = ChatStream(events())
    with pytest.raises(ServerError) as caught:
        stream.response()
    _check_failed(stream.collector, caught.value)

    async def run() -> tuple[StreamCollector, Error]:
        astream = AsyncChatStream(aevents())
        try:
            await astream.response()
        except Error as error:
            return astream.collector, error
        raise AssertionError("the stream did not fail")

    _check_failed(*asyncio.run(run()))


def test_an_incomplete_stream_keeps_its_usage() -> None:
    body = response(
        [MESSAGE], status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    events = decode_stream(openai_stream_of(body))
    assert UsageEvent(usage=USAGE) in events
    collected = collect(events)
    assert collected == decode(body)
    assert collected.usage == USAGE and collected.finish_reason == FinishReason.LENGTH


def test_a_failed_body_raises_its_error_with_its_usage_kept_for_the_record() -> None:
    """No `ChatResponse` comes back: the usage goes with the error, and an extraction
    records it (paid for, not a pass), as a failed stream's is."""
    with pytest.raises(ServerError) as caught:
        decode(FAILED)
    assert caught.value.context.body == json.dumps({"error": FAILED["error"]})
    reported = caught.value.context.metadata[REPORTED_USAGE_KEY]
    assert Usage.model_validate(reported) == KEPT_USAGE
    with _provider(json.dumps(FAILED).encode()) as target:
        with pytest.raises(ServerError):
            target.chat(REQUEST)

        class Answer(BaseModel):
            city: str

        with pytest.raises(ServerError) as failed:
            allama.extract(target, Answer, REQUEST)
    record = ExtractionMetadata.from_error(failed.value)
    assert record is not None and (record.passes, record.usage) == (0, KEPT_USAGE)


# Replay of the recorded Responses API traffic

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))


def _recordings() -> list[tuple[str, dict[str, Any]]]:
    if not CORPUS.is_dir():
        return []
    found = []
    for path in sorted(CORPUS.glob("*/*.json")):
        data = json.loads(path.read_text())
        endpoint = str(data.get("endpoint") or "").split("?")[0]
        if path.parent.name == "openai_responses" or endpoint.endswith("/responses"):
            found.append((f"{path.parent.name}/{path.stem}", data))
    return found


RECORDINGS = _recordings()
BODIES = [
    (key, data)
    for key, data in RECORDINGS
    if int(data["status"]) < 400 and isinstance(data.get("response_body"), dict)
]
STREAMS = [(key, data) for key, data in RECORDINGS if isinstance(data.get("stream"), str)]


def expected_annotations(output: Any) -> list[dict[str, Any]]:
    """Read from a recorded output alone: the position each surfaced part or item takes,
    and the annotations of each `output_text` part that has any."""
    kept: list[dict[str, Any]] = []
    position = 0
    for item in output if isinstance(output, list) else []:
        if item.get("type") in ("function_call", "reasoning"):
            position += 1
        elif item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    if part.get("annotations"):
                        kept.append({"index": position, "annotations": part["annotations"]})
                    position += 1
                elif part.get("type") == "refusal":
                    position += 1
    return kept


def usage_of_recording(raw: dict[str, Any]) -> Usage:
    """A recorded usage by allama's names, read independently of the adapter."""
    inputs = raw.get("input_tokens_details") or {}
    outputs = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("input_tokens"),
        output_tokens=raw.get("output_tokens"),
        reasoning_tokens=outputs.get("reasoning_tokens"),
        cache_read_tokens=inputs.get("cached_tokens"),
        cache_write_tokens=inputs.get("cache_write_tokens"),
    )


def _terminal(stream: str) -> dict[str, Any] | None:
    """The first terminal event of a recorded stream."""
    for event in events_of(stream.encode()):
        if event.get("type") in (
            "error",
            "response.failed",
            "response.completed",
            "response.incomplete",
            "response.done",
        ):
            return event
    return None


def test_the_corpus_is_there() -> None:
    if not RECORDINGS:
        pytest.skip(f"no Responses API recordings under {CORPUS}")
    assert BODIES and STREAMS


@pytest.mark.parametrize(("key", "data"), BODIES, ids=[key for key, _ in BODIES])
def test_recorded_body_keeps_its_annotations(key: str, data: dict[str, Any]) -> None:
    body = data["response_body"]
    decoded = decode_response(200, {}, json.dumps(body).encode())
    expected = expected_annotations(body.get("output"))
    assert decoded.provider_value(NAMESPACE, ANNOTATIONS_KEY) == (expected or None)
    for entry in expected:
        assert isinstance(decoded.content[entry["index"]], TextPart)


@pytest.mark.parametrize(("key", "data"), STREAMS, ids=[key for key, _ in STREAMS])
def test_recorded_stream_keeps_what_its_terminal_event_says(key: str, data: dict[str, Any]) -> None:
    """Annotations as the final response holds them; the usage a failed response reports,
    kept before its error; an `error` event first ends the stream there."""
    stream = data["stream"]
    terminal = _terminal(stream)
    assert terminal is not None
    collector = StreamCollector()
    decoder = ResponsesStreamDecoder()
    error: Error | None = None
    try:
        for event in [*decoder.feed(stream.encode()), *decoder.close()]:
            collector.push(event)
    except Error as failed:
        error = failed
    final = terminal.get("response")
    final = final if isinstance(final, dict) else {}
    if terminal["type"] == "error" or final.get("status") == "failed":
        assert error is not None
        usage = final.get("usage") if terminal["type"] != "error" else None
        reported = collector.response_metadata().usage
        assert reported == (usage_of_recording(usage) if isinstance(usage, dict) else None)
        return
    assert error is None
    collected = collector.finish()
    expected = expected_annotations(final.get("output"))
    assert collected.provider_value(NAMESPACE, ANNOTATIONS_KEY) == (expected or None)
    assert collected.provider_data == decode_object(final).provider_data


def test_the_recorded_failed_stream_is_an_error_event_first() -> None:
    """The one recorded failure sends `error`, then `response.failed` (usage null): the
    error event ends the stream, as before."""
    found = [data for key, data in STREAMS if key.endswith("error_in_stream_rate_limit_tpm")]
    if not found:
        pytest.skip("the recording is not in this corpus")
    stream = found[0]["stream"].encode()
    decoder = ResponsesStreamDecoder()
    with pytest.raises(RateLimitedError):
        list(decoder.feed(stream))
