"""What the Anthropic Messages adapter keeps beside the content: citations and usage details.

The citations of a text block are kept verbatim under `provider_data["anthropic"]
["citations"]`, a list in block order of `{"index": i, "citations": [...]}` where
`content[i]` is the text they support; what usage says beyond the token counts that changes
the bill (`server_tool_use`, `cache_creation`, `service_tier`) is kept verbatim under
`provider_data["anthropic"]["usage_details"]`. A body and the stream of the same message,
split anywhere, give the same response. A replay reads the recorded Anthropic cases under
`ALLAMA_CORPUS_DIR` (default `../shared/corpus/cases` next to the repository), with
expectations computed from the recording alone.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allama.adapters.anthropic._decode import (
    CITATIONS_KEY,
    NAMESPACE,
    USAGE_DETAILS_KEY,
)
from allama.adapters.anthropic._sse import MessagesStreamDecoder, decode_stream
from allama.stream import StreamCollector
from allama.types import (
    BlockStart,
    BlockStop,
    Finish,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    Usage,
    UsageEvent,
)
from test_anthropic_decode import collect, decode, feed_split, message, pieces, sse

# Helpers


_LATE_USAGE = ("output_tokens", "output_tokens_details", "server_tool_use")


def stream_of(msg: dict[str, Any], modes: Sequence[str] = ("delta",)) -> bytes:
    """The stream Anthropic sends for a message. The k-th text block's citations come by
    `modes[k % len(modes)]`: `delta` (the start carries `citations: []`, each citation
    follows in a `citations_delta` before a piece of the text), `start` (the start carries
    them all) or `split` (the first on the start, the rest by delta). Usage: the input
    counts, `cache_creation` and `service_tier` at `message_start`; the output counts and
    `server_tool_use` in `message_delta`, which replaces the zero count the start gave."""
    usage = dict(msg.get("usage") or {})
    late = {k: usage.pop(k) for k in _LATE_USAGE if k in usage}
    if isinstance(late.get("server_tool_use"), dict):
        usage["server_tool_use"] = {"web_search_requests": 0}
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    texts = 0
    for index, block in enumerate(msg["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            mode = modes[texts % len(modes)]
            texts += 1
            cited = block.get("citations") or []
            first: dict[str, Any] = {"type": "text", "text": ""}
            on_start: list[Any] = []
            if mode == "start":
                on_start, cited = cited, []
                if "citations" in block:
                    first["citations"] = block["citations"]
            elif mode == "split":
                on_start, cited = cited[:1], cited[1:]
                first["citations"] = on_start
            elif "citations" in block:
                first["citations"] = []
            text = pieces(block["text"])
            for at in range(max(len(cited), len(text))):
                if at < len(cited):
                    deltas.append({"type": "citations_delta", "citation": cited[at]})
                if at < len(text):
                    deltas.append({"type": "text_delta", "text": text[at]})
        elif kind in ("tool_use", "server_tool_use"):
            first = {**block, "input": {}}
            raw = json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(raw)]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            first = block
        events.append({"type": "content_block_start", "index": index, "content_block": first})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": late,
        }
    )
    events.append({"type": "message_stop"})
    return sse(*events)


def provider_events(events: Iterable[StreamEvent], key: str) -> list[Any]:
    return [
        event.value
        for event in events
        if isinstance(event, ProviderDataEvent)
        and event.namespace == NAMESPACE
        and event.key == key
    ]


def reported(data: bytes, key: str) -> list[Any]:
    """What the stream reported under `key`, each value copied as it was when it arrived (the
    decoder extends the list it reports citations in, rather than copy it at every stop)."""
    decoder = MessagesStreamDecoder()
    return [
        copy.deepcopy(event.value)
        for event in itertools.chain(decoder.feed(data), decoder.close())
        if isinstance(event, ProviderDataEvent)
        and event.namespace == NAMESPACE
        and event.key == key
    ]


# One citation of each kind Anthropic sends, as its API reference shapes them.

CHAR = {
    "type": "char_location",
    "cited_text": "The grass is green.",
    "document_index": 0,
    "document_title": "Facts",
    "start_char_index": 0,
    "end_char_index": 20,
    "file_id": None,
}
PAGE = {
    "type": "page_location",
    "cited_text": "Zürich liegt am See.",
    "document_index": 1,
    "document_title": None,
    "start_page_number": 2,
    "end_page_number": 3,
}
BLOCK = {
    "type": "content_block_location",
    "cited_text": "東京は首都です。",
    "document_index": 2,
    "document_title": "Custom",
    "start_block_index": 0,
    "end_block_index": 1,
}
WEB = {
    "type": "web_search_result_location",
    "cited_text": "Sunny, 21 °C",
    "url": "https://example.com/weather",
    "title": "Weather",
    "encrypted_index": "Eo8BCioIAhgBIiQ3YTk5",
}
SEARCH = {
    "type": "search_result_location",
    "cited_text": "Result text",
    "source": "https://example.com/kb/1",
    "title": "KB",
    "search_result_index": 0,
    "start_block_index": 0,
    "end_block_index": 0,
}

SIGNATURE = "EqQBCkYIBxgCKkB" + "s" * 40
SEARCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "weather"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://example.com/weather"}],
}
FETCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_2",
    "name": "web_fetch",
    "input": {"url": "https://example.com/doc.pdf"},
}
FETCH_RESULT = {
    "type": "web_fetch_tool_result",
    "tool_use_id": "srvtoolu_2",
    "content": {"type": "web_fetch_result", "url": "https://example.com/doc.pdf"},
}
DETAILS = {
    "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1},
    "cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 60},
    "service_tier": "priority",
}
CITED = message(
    [
        {"type": "thinking", "thinking": "Search first", "signature": SIGNATURE},  # 0
        SEARCH_CALL,
        SEARCH_RESULT,
        {"type": "text", "text": "It is sunny.", "citations": [WEB]},  # 1
        {"type": "text", "text": " Also:", "citations": None},  # 2
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},  # 3
        FETCH_CALL,
        FETCH_RESULT,
        {"type": "text", "text": "Page 2 says so.", "citations": [PAGE, CHAR]},  # 4
        {"type": "text", "text": " See", "citations": []},  # 5
        {"type": "text", "text": " the end.", "citations": [BLOCK, SEARCH, WEB]},  # 6
        {"type": "tool_use", "id": "toolu_1", "name": "save", "input": {"ok": True}},  # 7
    ],
    stop_reason="tool_use",
    usage={
        "input_tokens": 12,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 0,
        "output_tokens": 40,
        **DETAILS,
    },
)
CITED_ENTRIES = [
    {"index": 1, "citations": [WEB]},
    {"index": 4, "citations": [PAGE, CHAR]},
    {"index": 6, "citations": [BLOCK, SEARCH, WEB]},
]


# Citations in a body


def test_body_keeps_citations_by_content_position() -> None:
    response = decode(CITED)
    assert response.content == (
        Reasoning(text="Search first", signature=SIGNATURE),
        TextPart(text="It is sunny."),
        TextPart(text=" Also:"),
        Reasoning(text="", encrypted_content="EmwKAhgBEgy3va3pzix"),
        TextPart(text="Page 2 says so."),
        TextPart(text=" See"),
        TextPart(text=" the end."),
        ToolCall(id="toolu_1", name="save", arguments='{"ok":true}'),
    )
    assert response.provider_data == {
        "anthropic": {
            "server_blocks": [SEARCH_CALL, SEARCH_RESULT, FETCH_CALL, FETCH_RESULT],
            # It searched before its tool call: it goes back whole, the results with it.
            "resume": {
                "paused": False,
                "blocks": [
                    0,
                    SEARCH_CALL,
                    SEARCH_RESULT,
                    1,
                    2,
                    3,
                    FETCH_CALL,
                    FETCH_RESULT,
                    4,
                    5,
                    6,
                    7,
                ],
            },
            "citations": CITED_ENTRIES,
            "usage_details": DETAILS,
        }
    }
    assert [response.content[entry["index"]] for entry in CITED_ENTRIES] == [
        TextPart(text="It is sunny."),
        TextPart(text="Page 2 says so."),
        TextPart(text=" the end."),
    ]
    assert response.text() == "It is sunny. Also:Page 2 says so. See the end."


@pytest.mark.parametrize("citations", [None, [], "missing"])
def test_a_body_without_citations_has_no_key(citations: Any) -> None:
    block: dict[str, Any] = {"type": "text", "text": "plain"}
    if citations != "missing":
        block["citations"] = citations
    response = decode(message([block, SEARCH_CALL, {"type": "text", "text": "more"}]))
    assert response.provider_data == {
        "anthropic": {
            "server_blocks": [SEARCH_CALL],
            "resume": {"paused": False, "blocks": [0, SEARCH_CALL, 1]},
        }
    }
    assert response.provider_value(NAMESPACE, CITATIONS_KEY) is None


def test_citations_on_a_server_block_stay_in_the_block() -> None:
    future = {"type": "future_block", "text": "x", "citations": [CHAR]}
    response = decode(message([future, {"type": "text", "text": "y", "citations": [PAGE]}]))
    assert response.provider_data == {
        "anthropic": {
            "server_blocks": [future],
            "resume": {"paused": False, "blocks": [future, 0]},
            "citations": [{"index": 0, "citations": [PAGE]}],
        }
    }


# Citations in a stream


def test_the_stream_gives_what_the_body_gives() -> None:
    for modes in (("delta",), ("start",), ("split",), ("split", "start", "delta")):
        raw = stream_of(CITED, modes)
        events = decode_stream(raw)
        assert collect(events) == decode(CITED)
        assert reported(raw, CITATIONS_KEY) == [
            CITED_ENTRIES[:1],
            CITED_ENTRIES[:2],
            CITED_ENTRIES,
        ]
        texts = [e.index for e in events if isinstance(e, BlockStart) and e.block_type == "text"]
        assert texts == [1, 2, 4, 5, 6]


def test_citations_are_reported_right_after_their_block_stops() -> None:
    data = sse(
        {"type": "message_start", "message": {"id": "m", "model": "c", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": SEARCH_CALL},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "", "citations": [PAGE]},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": CHAR},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "A"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    )
    assert decode_stream(data) == [
        ResponseStart(id="m", model="c"),
        ProviderDataEvent(namespace="anthropic", key="server_blocks", value=[SEARCH_CALL]),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="A"),
        BlockStop(index=0),
        ProviderDataEvent(
            namespace="anthropic",
            key="citations",
            value=[{"index": 0, "citations": [PAGE, CHAR]}],
        ),
        ProviderDataEvent(
            namespace="anthropic", key="resume", value={"paused": False, "blocks": [SEARCH_CALL, 0]}
        ),
        Finish(finish_reason=FinishReason.STOP),
    ]


@pytest.mark.parametrize(
    "start",
    [
        {"type": "text", "text": "A"},
        {"type": "text", "text": "A", "citations": []},
        {"type": "text", "text": "A", "citations": None},
    ],
)
def test_a_text_block_without_citations_reports_none(start: dict[str, Any]) -> None:
    data = sse(
        {"type": "content_block_start", "index": 0, "content_block": start},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    )
    events = decode_stream(data)
    assert provider_events(events, CITATIONS_KEY) == []
    assert collect(events).provider_data == {}


def test_a_cited_block_still_open_at_the_stop_reason_is_reported() -> None:
    data = sse(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": "A", "citations": []},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": WEB},
        },
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}},
    )
    response = collect(decode_stream(data))
    assert response.content == (TextPart(text="A"),)
    assert response.provider_data == {
        "anthropic": {"citations": [{"index": 0, "citations": [WEB]}]}
    }


def test_blocks_stopping_out_of_order_are_listed_in_block_order() -> None:
    def start(index: int) -> dict[str, Any]:
        block = {"type": "text", "text": str(index), "citations": [{"n": index}]}
        return {"type": "content_block_start", "index": index, "content_block": block}

    data = sse(
        start(0),
        start(1),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    )
    assert reported(data, CITATIONS_KEY) == [
        [{"index": 1, "citations": [{"n": 1}]}],
        [{"index": 0, "citations": [{"n": 0}]}, {"index": 1, "citations": [{"n": 1}]}],
    ]
    response = collect(decode_stream(data))
    assert response.content == (TextPart(text="0"), TextPart(text="1"))


def test_each_report_of_many_cited_blocks_is_a_snapshot() -> None:
    """Every report is the list as it stood at that block's stop: an event kept by the
    caller does not grow as later blocks stop."""
    count = 300
    many = message([{"type": "text", "text": "t", "citations": [{"i": i}]} for i in range(count)])
    decoder = MessagesStreamDecoder()
    collector = StreamCollector()
    reports: list[list[Any]] = []
    for event in itertools.chain(decoder.feed(stream_of(many)), decoder.close()):
        collector.push(event)
        if isinstance(event, ProviderDataEvent) and event.key == CITATIONS_KEY:
            assert isinstance(event.value, list)
            reports.append(event.value)
    response = collector.finish()
    assert [len(report) for report in reports] == list(range(1, count + 1))
    assert reports[0] == [{"index": 0, "citations": [{"i": 0}]}]
    assert response.provider_value(NAMESPACE, CITATIONS_KEY) == [
        {"index": i, "citations": [{"i": i}]} for i in range(count)
    ]


# Usage details


def test_body_keeps_usage_details_verbatim_and_the_counts_unchanged() -> None:
    usage = {
        "input_tokens": 7,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 20,
        "output_tokens": 9,
        "inference_geo": "us",
        **DETAILS,
    }
    response = decode(message([{"type": "text", "text": "hi"}], usage=usage))
    # US-only inference is billed above the standard price: kept, as fast mode is.
    kept = {**DETAILS, "inference_geo": "us"}
    assert response.provider_data == {"anthropic": {"usage_details": kept}}
    assert response.usage == Usage(
        input_tokens=127, output_tokens=9, cache_read_tokens=20, cache_write_tokens=100
    )


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": 1, "output_tokens": 2}, None),
        (
            {"input_tokens": 1, "server_tool_use": None, "cache_creation": None},
            None,
        ),
        ({"service_tier": "batch", "server_tool_use": None}, {"service_tier": "batch"}),
        (
            {"server_tool_use": {"web_search_requests": 0}},
            {"server_tool_use": {"web_search_requests": 0}},
        ),
    ],
)
def test_body_usage_details_only_what_is_there(
    usage: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    response = decode(message([], usage=usage))
    assert response.provider_value(NAMESPACE, USAGE_DETAILS_KEY) == expected
    assert (USAGE_DETAILS_KEY in response.provider_data.get(NAMESPACE, {})) is (
        expected is not None
    )


def test_a_body_without_usage_has_no_details() -> None:
    body = message([{"type": "text", "text": "x"}])
    del body["usage"]
    assert decode(body).provider_data == {}


def test_stream_usage_details_are_running_totals() -> None:
    start_usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    final = {"web_search_requests": 3, "web_fetch_requests": 1}
    data = sse(
        {"type": "message_start", "message": {"id": "m", "content": [], "usage": start_usage}},
        {
            "type": "message_delta",
            "delta": {},
            "usage": {"output_tokens": 3, "server_tool_use": {"web_search_requests": 1}},
        },
        {
            "type": "message_delta",
            "delta": {},
            "usage": {"output_tokens": 4, "server_tool_use": {"web_search_requests": 1}},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9, "server_tool_use": final, "cache_creation": None},
        },
        {"type": "message_stop"},
    )
    events = decode_stream(data)
    start_details = {
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    }
    assert provider_events(events, USAGE_DETAILS_KEY) == [
        start_details,
        {**start_details, "server_tool_use": {"web_search_requests": 1}},
        {**start_details, "server_tool_use": final},
    ]
    assert [e.usage for e in events if isinstance(e, UsageEvent)][-1] == Usage(
        input_tokens=105, output_tokens=9, cache_read_tokens=0, cache_write_tokens=100
    )
    whole = message(
        [],
        id="m",
        model=None,
        usage={**start_usage, "output_tokens": 9, "server_tool_use": final},
    )
    assert collect(events) == decode(whole)


def test_a_stream_without_usage_details_reports_none() -> None:
    data = sse(
        {
            "type": "message_start",
            "message": {"id": "m", "content": [], "usage": {"input_tokens": 3}},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"x": None}},
    )
    events = decode_stream(data)
    assert provider_events(events, USAGE_DETAILS_KEY) == []
    assert collect(events).provider_data == {}


def test_the_whole_message_streamed_matches_the_body_with_its_details() -> None:
    events = decode_stream(stream_of(CITED, ("split",)))
    assert provider_events(events, USAGE_DETAILS_KEY)[-1] == DETAILS
    assert collect(events).provider_data == decode(CITED).provider_data


# Any message, streamed and split anywhere, collects to what its body decodes to.

_text = st.text(max_size=12)
_ids = st.text("abcXYZ0189_", min_size=1, max_size=8)
_citation = st.one_of(
    st.sampled_from([CHAR, PAGE, BLOCK, WEB, SEARCH]),
    st.builds(lambda t: {"type": "char_location", "cited_text": t}, _text),
)
_missing = object()
_text_block = st.builds(
    lambda t, c: (
        {"type": "text", "text": t}
        if c is _missing
        else {"type": "text", "text": t, "citations": c}
    ),
    _text,
    st.one_of(
        st.sampled_from([_missing, None, []]),
        st.lists(_citation, min_size=1, max_size=3),
        st.lists(_citation, min_size=1, max_size=3),
    ),
)
_blocks = st.one_of(
    _text_block,
    _text_block,
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        _text,
        _ids,
    ),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, _ids),
    st.builds(
        lambda i, q: {"type": "tool_use", "id": i, "name": "f", "input": {"q": q}},
        _ids,
        _text,
    ),
    st.builds(
        lambda i, q: {"type": "server_tool_use", "id": i, "name": "web_search", "input": {"q": q}},
        _ids,
        _text,
    ),
    st.builds(
        lambda i, c: {"type": "web_search_tool_result", "tool_use_id": i, "content": [c]},
        _ids,
        _citation,
    ),
)
_details = st.fixed_dictionaries(
    {},
    optional={
        "server_tool_use": st.fixed_dictionaries(
            {"web_search_requests": st.integers(0, 50)},
            optional={"web_fetch_requests": st.integers(0, 50)},
        ),
        "cache_creation": st.fixed_dictionaries(
            {
                "ephemeral_5m_input_tokens": st.integers(0, 10**6),
                "ephemeral_1h_input_tokens": st.integers(0, 10**6),
            }
        ),
        "service_tier": st.sampled_from(["standard", "priority", "batch"]),
    },
)
_messages = st.builds(
    lambda content, details, reason: message(
        content,
        stop_reason=reason,
        usage={"input_tokens": 4, "cache_read_input_tokens": 8, "output_tokens": 2, **details},
    ),
    st.lists(_blocks, max_size=8),
    _details,
    st.sampled_from(["end_turn", "tool_use", "pause_turn", "max_tokens"]),
)


def expected_citations(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The citations entries read from the blocks alone: a text block's position counts the
    text, tool-use and thinking blocks before it."""
    surfaced = 0
    out = []
    for block in content:
        if block["type"] == "text" and block.get("citations"):
            out.append({"index": surfaced, "citations": block["citations"]})
        if block["type"] in ("text", "tool_use", "thinking", "redacted_thinking"):
            surfaced += 1
    return out


@settings(max_examples=150, deadline=None)
@given(
    msg=_messages,
    modes=st.lists(st.sampled_from(["delta", "start", "split"]), min_size=1, max_size=3),
    data=st.data(),
)
def test_any_message_streamed_and_split_anywhere_collects_to_its_body(
    msg: dict[str, Any], modes: list[str], data: st.DataObject
) -> None:
    raw = stream_of(msg, modes)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    expected = decode(msg)
    collected = collect(feed_split(raw, cuts))
    assert collected == expected
    entries = expected_citations(msg["content"])
    assert expected.provider_value(NAMESPACE, CITATIONS_KEY) == (entries or None)
    for entry in entries:
        assert isinstance(collected.content[entry["index"]], TextPart)
    details = {k: v for k, v in msg["usage"].items() if k in DETAILS}
    assert collected.provider_value(NAMESPACE, USAGE_DETAILS_KEY) == (details or None)


def test_one_byte_at_a_time() -> None:
    raw = stream_of(CITED, ("split", "delta"))
    assert collect(feed_split(raw, range(len(raw)))) == decode(CITED)


# Replay of the recorded Anthropic traffic

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))


def _cases() -> list[tuple[str, dict[str, Any]]]:
    folder = CORPUS / "anthropic"
    if not folder.is_dir():
        return []
    cases = [(path.stem, json.loads(path.read_text())) for path in sorted(folder.glob("*.json"))]
    return [
        (key, data)
        for key, data in cases
        if int(data["status"]) < 400 and "in_stream_error" not in data.get("tags", [])
    ]


CASES = _cases()
BODIES = [(key, data) for key, data in CASES if not isinstance(data.get("stream"), str)]
STREAMS = [(key, data) for key, data in CASES if isinstance(data.get("stream"), str)]


def _details_of(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    details = {k: v for k, v in (usage or {}).items() if k in DETAILS and v is not None}
    return details or None


def _sse_data(stream: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            if data:
                events.append(json.loads("\n".join(data)))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


@pytest.mark.parametrize(("key", "case"), BODIES, ids=[key for key, _ in BODIES])
def test_recorded_body_keeps_its_usage_details_and_citations(
    key: str, case: dict[str, Any]
) -> None:
    body = case["response_body"]
    response = decode(body)
    assert response.provider_value(NAMESPACE, USAGE_DETAILS_KEY) == _details_of(body.get("usage"))
    entries = expected_citations([b for b in body["content"] if isinstance(b, dict)])
    assert response.provider_value(NAMESPACE, CITATIONS_KEY) == (entries or None)


@pytest.mark.parametrize(("key", "case"), STREAMS, ids=[key for key, _ in STREAMS])
def test_recorded_stream_keeps_its_usage_details(key: str, case: dict[str, Any]) -> None:
    usage: dict[str, Any] = {}
    for event in _sse_data(case["stream"]):
        if event.get("type") == "message_start":
            usage = dict(event["message"].get("usage") or {})
        elif event.get("type") == "message_delta":
            usage.update((k, v) for k, v in (event.get("usage") or {}).items() if v is not None)
    response = collect(decode_stream(case["stream"].encode()))
    assert response.provider_value(NAMESPACE, USAGE_DETAILS_KEY) == _details_of(usage)


def test_the_recorded_web_search_keeps_its_request_count() -> None:
    cases = dict(CASES)
    case = cases.get("pause_turn_server_tool")
    if case is None:
        pytest.skip(f"the web search recording is not in {CORPUS}")
    response = decode(case["response_body"])
    assert response.provider_value(NAMESPACE, USAGE_DETAILS_KEY) == {
        "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
        "server_tool_use": {"web_search_requests": 10},
        "service_tier": "standard",
    }
    assert response.usage == Usage(
        input_tokens=401468, output_tokens=792, cache_read_tokens=0, cache_write_tokens=0
    )


def test_the_corpus_is_there() -> None:
    if not CASES:
        pytest.skip(f"no Anthropic cases under {CORPUS}")
    assert BODIES and STREAMS
