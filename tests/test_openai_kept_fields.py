"""What the Chat Completions adapter keeps in `provider_data` that allama has no type for.

`message.annotations` (web-search citations), OpenRouter's `reasoning_details` (to be sent
back unmodified) and the cost a usage reports (OpenRouter's `cost`, `cost_details`,
`is_byok`; xAI's `cost_in_usd_ticks`), in a body and in a stream, where a collected stream
equals the decoded body of the same message; and no key at all when a provider sends none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from allama import ChatRequest
from allama.adapters import openai_compat
from allama.adapters.openai_compat._decode import (
    ANNOTATIONS_KEY,
    REASONING_DETAILS_KEY,
    USAGE_COST_KEY,
    decode_body,
)
from allama.adapters.openai_compat._sse import ChatStreamDecoder, decode_stream
from allama.errors import InvalidRequestError, ServerError
from allama.stream import StreamCollector
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    ChatResponse,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    StreamEvent,
    TextPart,
    ToolCall,
    Usage,
)
from test_openai_outside_probes import answering, sse
from test_openai_sse import split_at

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))


# Helpers


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "gen-1", "model": "m", "choices": choices, **extra}


def body(message: dict[str, Any], finish: str = "stop", **extra: Any) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return json.dumps({"id": "gen-1", "model": "m", "choices": [choice], **extra}).encode()


def collect(events: Iterable[StreamEvent], provider: str | None = None) -> ChatResponse:
    collector = StreamCollector()
    collector.provider = provider
    for event in events:
        collector.push(event)
    return collector.finish()


def streamed(data: bytes, provider: str) -> ChatResponse:
    return collect(decode_stream(data, provider=provider), provider)


def recording(key: str) -> dict[str, Any]:
    path = CORPUS / f"{key}.json"
    if not path.is_file():
        pytest.skip(f"{key} is not in {CORPUS}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_the_keys_are_exported() -> None:
    assert (ANNOTATIONS_KEY, REASONING_DETAILS_KEY, USAGE_COST_KEY) == (
        "annotations",
        "reasoning_details",
        "usage_cost",
    )
    assert openai_compat.ANNOTATIONS_KEY is ANNOTATIONS_KEY
    assert openai_compat.REASONING_DETAILS_KEY is REASONING_DETAILS_KEY
    assert openai_compat.USAGE_COST_KEY is USAGE_COST_KEY


# 1. Annotations

CITATION_A = {
    "type": "url_citation",
    "url_citation": {
        "start_index": 0,
        "end_index": 20,
        "url": "https://example.com/a?utm_source=openai",
        "title": "A",
    },
}
CITATION_B = {
    "type": "url_citation",
    "url_citation": {"start_index": 22, "end_index": 35, "url": "https://b.example", "title": "B"},
}
CITATION_C = {"type": "file", "file": {"hash": "h1", "name": "doc.pdf"}}

ANNOTATED_TEXT = "Paris is the capital. It is in France."
ANNOTATED_BODY = body(
    {
        "content": ANNOTATED_TEXT,
        "refusal": None,
        "annotations": [CITATION_A, CITATION_B, CITATION_C],
    },
    usage={"prompt_tokens": 9, "completion_tokens": 10, "total_tokens": 19},
)
ANNOTATED_STREAM = sse(
    chunk({"role": "assistant", "content": "Paris is the capital.", "annotations": []}),
    chunk({"content": " It is in France.", "annotations": [CITATION_A]}),
    chunk({"annotations": [CITATION_B, CITATION_C]}),
    chunk({}, "stop"),
    chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 10, "total_tokens": 19}),
    "[DONE]",
)


def test_body_annotations_are_kept_verbatim_in_order() -> None:
    response = decode_body(ANNOTATED_BODY, provider="openai")
    assert response.provider_data == {
        "openai": {ANNOTATIONS_KEY: [CITATION_A, CITATION_B, CITATION_C]}
    }
    assert response.text() == ANNOTATED_TEXT


def test_streamed_annotations_are_appended_in_order_and_equal_the_body() -> None:
    response = streamed(ANNOTATED_STREAM, "openai")
    assert response.provider_data == {
        "openai": {ANNOTATIONS_KEY: [CITATION_A, CITATION_B, CITATION_C]}
    }
    assert response == decode_body(ANNOTATED_BODY, provider="openai")


def test_each_annotated_chunk_emits_the_whole_list_so_far() -> None:
    events = decode_stream(ANNOTATED_STREAM, provider="openai")
    values = [e.value for e in events if isinstance(e, ProviderDataEvent)]
    assert values == [[CITATION_A], [CITATION_A, CITATION_B, CITATION_C]]


def test_annotations_after_the_finish_reason_are_kept() -> None:
    data = sse(
        chunk({"content": ANNOTATED_TEXT}),
        chunk({}, "stop"),
        chunk({"annotations": [CITATION_A]}),
        "[DONE]",
    )
    response = streamed(data, "openrouter")
    assert response.provider_data == {"openrouter": {ANNOTATIONS_KEY: [CITATION_A]}}
    assert response.finish_reason == FinishReason.STOP


def test_openrouter_annotations_go_to_its_namespace_through_the_provider() -> None:
    target = allama.provider("openrouter", api_key="k", transport=answering(200, ANNOTATED_BODY))
    response = target.chat(ChatRequest("openai/gpt-4o:online").user("capital?"))
    assert response.provider_value("openrouter", ANNOTATIONS_KEY) == [
        CITATION_A,
        CITATION_B,
        CITATION_C,
    ]


# 2. OpenRouter reasoning_details

SIGNATURE = "EqYDCkgICxACGAIqQNsOj6PE+duVt8oIRuUmE1rZG5ZkPG2qzFQ=="
THOUGHT = "The user asks for the weather. I will call the tool."
CLAUDE_DETAILS = [
    {
        "type": "reasoning.text",
        "text": THOUGHT,
        "format": "anthropic-claude-v1",
        "index": 0,
        "signature": SIGNATURE,
    }
]
CALL = {
    "type": "function",
    "index": 0,
    "id": "toolu_1",
    "function": {"name": "weather", "arguments": '{"location": "Florence"}'},
}
CLAUDE_BODY = body(
    {
        "content": None,
        "reasoning": THOUGHT,
        "tool_calls": [CALL],
        "reasoning_details": CLAUDE_DETAILS,
    },
    "tool_calls",
)


def _text_piece(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "reasoning.text",
        "text": text,
        "format": "anthropic-claude-v1",
        "index": 0,
        **extra,
    }


# As OpenRouter streams Claude (the recording openrouter/reasoning_stream): an empty first
# piece with an empty signature, the text in pieces, an empty piece, the signature alone.
CLAUDE_STREAM = sse(
    chunk({"role": "assistant", "content": "", "reasoning": None, "reasoning_details": []}),
    chunk({"content": "", "reasoning": None, "reasoning_details": [_text_piece("", signature="")]}),
    chunk({"reasoning": "The user asks", "reasoning_details": [_text_piece("The user asks")]}),
    chunk(
        {
            "reasoning": " for the weather. I will call the tool.",
            "reasoning_details": [_text_piece(" for the weather. I will call the tool.")],
        }
    ),
    chunk({"reasoning": None, "reasoning_details": [_text_piece("")]}),
    chunk(
        {
            "reasoning": None,
            "reasoning_details": [
                {
                    "type": "reasoning.text",
                    "signature": SIGNATURE,
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
            ],
        }
    ),
    chunk({"content": None, "reasoning_details": [], "tool_calls": [CALL]}),
    chunk({"content": "", "reasoning_details": []}, "tool_calls"),
    "[DONE]",
)

SUMMARY = "**Checking the weather**\n\nI call the tool."
ENCRYPTED = {
    "type": "reasoning.encrypted",
    "data": "gAAAAABpsse-I3DUazhapsT1MmHU==",
    "format": "openai-responses-v1",
    "id": "rs_0caf96",
    "index": 1,
}
GPT_DETAILS = [
    {"type": "reasoning.summary", "summary": SUMMARY, "format": "openai-responses-v1", "index": 0},
    ENCRYPTED,
]
GPT_BODY = body(
    {"content": None, "reasoning": SUMMARY, "tool_calls": [CALL], "reasoning_details": GPT_DETAILS},
    "tool_calls",
)


def _summary_piece(text: str) -> dict[str, Any]:
    return {
        "type": "reasoning.summary",
        "summary": text,
        "format": "openai-responses-v1",
        "index": 0,
    }


# As OpenRouter streams GPT-5: the summary in pieces, then the encrypted entry whole.
GPT_STREAM = sse(
    chunk(
        {
            "role": "assistant",
            "content": "",
            "reasoning": "**Checking",
            "reasoning_details": [_summary_piece("**Checking")],
        }
    ),
    chunk({"reasoning": " the weather**", "reasoning_details": [_summary_piece(" the weather**")]}),
    chunk(
        {
            "reasoning": "\n\nI call the tool.",
            "reasoning_details": [_summary_piece("\n\nI call the tool.")],
        }
    ),
    chunk({"reasoning": None, "reasoning_details": [ENCRYPTED]}),
    chunk({"content": None, "tool_calls": [CALL]}),
    chunk({"content": "", "reasoning": None}, "tool_calls"),
    "[DONE]",
)


def test_body_reasoning_details_are_kept_verbatim() -> None:
    claude = decode_body(CLAUDE_BODY, provider="openrouter")
    assert claude.provider_data == {"openrouter": {REASONING_DETAILS_KEY: CLAUDE_DETAILS}}
    assert claude.content == (
        Reasoning(text=THOUGHT),
        ToolCall(id="toolu_1", name="weather", arguments='{"location": "Florence"}'),
    )
    gpt = decode_body(GPT_BODY, provider="openrouter")
    assert gpt.provider_data == {"openrouter": {REASONING_DETAILS_KEY: GPT_DETAILS}}


def test_streamed_text_pieces_join_into_the_body_entry_with_its_signature() -> None:
    response = streamed(CLAUDE_STREAM, "openrouter")
    assert response.provider_data == {"openrouter": {REASONING_DETAILS_KEY: CLAUDE_DETAILS}}
    assert response == decode_body(CLAUDE_BODY, provider="openrouter")


def test_streamed_summary_pieces_join_and_the_encrypted_entry_follows() -> None:
    response = streamed(GPT_STREAM, "openrouter")
    assert response.provider_data == {"openrouter": {REASONING_DETAILS_KEY: GPT_DETAILS}}
    assert response == decode_body(GPT_BODY, provider="openrouter")


def test_reasoning_details_are_emitted_per_entry_not_per_piece() -> None:
    def pieces(index: int) -> list[dict[str, Any]]:
        return [{**_text_piece(f"t{n} "), "index": index} for n in range(500)]

    def joined(index: int) -> dict[str, Any]:
        return {**_text_piece("".join(f"t{n} " for n in range(500))), "index": index}

    data = sse(
        *(chunk({"reasoning_details": [piece]}) for piece in pieces(0)),
        chunk({"reasoning_details": [ENCRYPTED]}),
        *(chunk({"reasoning_details": [piece]}) for piece in pieces(2)),
        chunk({"content": "ok"}, "stop"),
        "[DONE]",
    )
    events = decode_stream(data, provider="openrouter")
    values = [e.value for e in events if isinstance(e, ProviderDataEvent)]
    # When an entry is complete (the next one begins), and at the finish.
    assert values == [
        [joined(0), ENCRYPTED],
        [joined(0), ENCRYPTED, {**_text_piece("t0 "), "index": 2}],
        [joined(0), ENCRYPTED, joined(2)],
    ]


def test_which_pieces_join_and_which_start_an_entry() -> None:
    unindexed = {"type": "reasoning.text", "text": "u", "format": "f"}
    first_id = {"type": "reasoning.encrypted", "data": "A", "id": "rs_1", "index": 0}
    data = sse(
        chunk({"reasoning_details": [_text_piece("a"), _text_piece("b")]}),
        # Same index, another type: a new entry.
        chunk({"reasoning_details": [_summary_piece("s")]}),
        # No index: never joined, even to an identical neighbour.
        chunk({"reasoning_details": [unindexed, unindexed]}),
        # Same type and index but another id: a new entry; no id: the same one.
        chunk({"reasoning_details": [first_id, {**first_id, "data": "B", "id": "rs_2"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "C", "index": 0}]}),
        # What is not an object is kept as it is, and ends the entry before it.
        chunk({"reasoning_details": ["odd", {"type": "reasoning.text", "text": None, "index": 3}]}),
        chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "x", "id": "late", "index": 3}
                ]
            }
        ),
        chunk({"content": "done"}, "stop"),
        "[DONE]",
    )
    response = streamed(data, "openrouter")
    assert response.provider_value("openrouter", REASONING_DETAILS_KEY) == [
        _text_piece("ab"),
        _summary_piece("s"),
        unindexed,
        unindexed,
        first_id,
        {"type": "reasoning.encrypted", "data": "BC", "id": "rs_2", "index": 0},
        "odd",
        {"type": "reasoning.text", "text": "x", "index": 3, "id": "late"},
    ]


def test_two_indexes_interleaved_make_an_entry_each_time_they_alternate() -> None:
    def encrypted(data: str, **more: Any) -> dict[str, Any]:
        return {"type": "reasoning.encrypted", "data": data, **more, "index": 1}

    aside = {**_summary_piece("Aside."), "index": 1}
    data = sse(
        chunk({"reasoning_details": [_summary_piece("**Plan")]}),
        chunk({"reasoning_details": [_summary_piece("ning**")]}),
        chunk({"reasoning_details": [encrypted("gAAA", format="openai-responses-v1", id="rs_1")]}),
        # No id: the same entry, its format as first given.
        chunk({"reasoning_details": [encrypted("BBB==", format="openai-responses-v2")]}),
        # Index 0 again, then 1 again (a summary, then encrypted), in one chunk: an entry
        # each, none joined to an earlier one of its index.
        chunk(
            {
                "reasoning_details": [
                    _summary_piece(" Then more."),
                    aside,
                    encrypted("CC", id="rs_1"),
                ]
            }
        ),
        chunk({"content": "ok"}, "stop"),
        "[DONE]",
    )
    events = list(decode_stream(data, provider="openrouter"))
    values = [e.value for e in events if isinstance(e, ProviderDataEvent)]
    first = _summary_piece("**Planning**")
    second = encrypted("gAAABBB==", format="openai-responses-v1", id="rs_1")
    third = _summary_piece(" Then more.")
    last = encrypted("CC", id="rs_1")
    # As an entry is complete (the next begins), with the one arriving as it is so far; the
    # finish changed nothing, so nothing more.
    assert values == [
        [first, encrypted("gAAA", format="openai-responses-v1", id="rs_1")],
        [first, second, third],
        [first, second, third, aside],
        [first, second, third, aside, last],
    ]
    assert list(values[-1][1]) == ["type", "data", "format", "id", "index"]
    assert collect(events).provider_data == {"openrouter": {REASONING_DETAILS_KEY: values[-1]}}


def test_pieces_after_the_finish_reason_still_join() -> None:
    data = sse(
        chunk({"reasoning_details": [_text_piece(THOUGHT)]}),
        chunk({"content": "Sunny."}, "stop"),
        chunk(
            {"reasoning_details": [{"type": "reasoning.text", "signature": SIGNATURE, "index": 0}]}
        ),
        "[DONE]",
    )
    response = streamed(data, "openrouter")
    assert response.provider_value("openrouter", REASONING_DETAILS_KEY) == [
        _text_piece(THOUGHT, signature=SIGNATURE)
    ]


def test_a_stream_cut_short_keeps_the_details_it_had() -> None:
    data = sse(chunk({"reasoning_details": [_text_piece("half")]}))
    events = decode_stream(data, provider="openrouter")
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    assert collector.partial_response().provider_data == {
        "openrouter": {REASONING_DETAILS_KEY: [_text_piece("half")]}
    }


def test_the_reasoning_blocks_stay_as_they_were() -> None:
    response = streamed(CLAUDE_STREAM, "openrouter")
    assert response.content[0] == Reasoning(text=THOUGHT)
    gpt = streamed(GPT_STREAM, "openrouter")
    assert gpt.content[0] == Reasoning(text=SUMMARY)


# 3. Provider-reported cost

OPENROUTER_USAGE = {
    "prompt_tokens": 43,
    "completion_tokens": 36,
    "total_tokens": 79,
    "cost": 0.000669,
    "is_byok": False,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "cost_details": {
        "upstream_inference_cost": None,
        "upstream_inference_prompt_cost": 0.000129,
        "upstream_inference_completions_cost": 0.00054,
    },
    "completion_tokens_details": {"reasoning_tokens": 13, "image_tokens": 0},
}
OPENROUTER_COST = {
    "cost": 0.000669,
    "is_byok": False,
    "cost_details": {
        "upstream_inference_cost": None,
        "upstream_inference_prompt_cost": 0.000129,
        "upstream_inference_completions_cost": 0.00054,
    },
}
XAI_USAGE = {
    "prompt_tokens": 192,
    "completion_tokens": 9,
    "total_tokens": 376,
    "completion_tokens_details": {"reasoning_tokens": 175},
    "num_sources_used": 0,
    "cost_in_usd_ticks": 5656000,
}


def test_body_cost_is_kept() -> None:
    openrouter = decode_body(body({"content": "4"}, usage=OPENROUTER_USAGE), provider="openrouter")
    assert openrouter.provider_data == {"openrouter": {USAGE_COST_KEY: OPENROUTER_COST}}
    assert openrouter.usage == Usage(
        input_tokens=43, output_tokens=36, reasoning_tokens=13, cache_read_tokens=0
    )
    xai = decode_body(
        body({"content": "4"}, usage=XAI_USAGE), provider="xai", reasoning_outside_completion=True
    )
    assert xai.provider_data == {"xai": {USAGE_COST_KEY: {"cost_in_usd_ticks": 5656000}}}
    assert xai.usage == Usage(input_tokens=192, output_tokens=184, reasoning_tokens=175)


def test_streamed_cost_equals_the_body() -> None:
    data = sse(
        chunk({"role": "assistant", "content": "4"}),
        chunk({}, "stop"),
        chunk(None, usage=OPENROUTER_USAGE),
        "[DONE]",
    )
    response = streamed(data, "openrouter")
    assert response.provider_data == {"openrouter": {USAGE_COST_KEY: OPENROUTER_COST}}
    assert response == decode_body(
        body({"content": "4"}, usage=OPENROUTER_USAGE), provider="openrouter"
    )


def test_the_last_reported_cost_wins() -> None:
    data = sse(
        chunk({"content": "4"}, usage={"prompt_tokens": 5, "cost": 0.1}),
        chunk(
            {},
            "stop",
            usage={"prompt_tokens": 5, "completion_tokens": 1, "cost": 0.25, "is_byok": True},
        ),
        "[DONE]",
    )
    response = streamed(data, "openrouter")
    assert response.provider_data == {
        "openrouter": {USAGE_COST_KEY: {"cost": 0.25, "is_byok": True}}
    }


def test_groq_usage_cost_in_x_groq_is_kept() -> None:
    data = sse(
        chunk({"content": "hi"}),
        chunk(
            {}, "stop", x_groq={"usage": {"prompt_tokens": 3, "completion_tokens": 1, "cost": 0.5}}
        ),
        "[DONE]",
    )
    assert streamed(data, "groq").provider_data == {"groq": {USAGE_COST_KEY: {"cost": 0.5}}}


def test_cost_beside_a_content_filter_explanation() -> None:
    filtered = json.dumps(
        {
            "id": "f",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "content_filter",
                    "content_filter_results": {"hate": {"filtered": True, "severity": "high"}},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 0, "cost": 0.01},
        }
    )
    response = decode_body(filtered, provider="openrouter")
    assert response.provider_data == {
        "openrouter": {
            DECLINE_EXPLANATION_KEY: "the content filter flagged: hate (high)",
            USAGE_COST_KEY: {"cost": 0.01},
        }
    }


# Absent: no key


PLAIN_USAGE = {
    "prompt_tokens": 24,
    "completion_tokens": 8,
    "total_tokens": 32,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "accepted_prediction_tokens": 0},
}


@pytest.mark.parametrize(
    "message",
    [
        {"content": "Paris.", "refusal": None, "annotations": []},
        {"content": "Paris.", "annotations": None, "reasoning_details": None},
        {"content": "Paris.", "reasoning": None, "reasoning_details": []},
        {"content": "Paris.", "annotations": "not a list", "reasoning_details": {}},
        {"content": "Paris."},
    ],
)
def test_nothing_to_keep_leaves_no_key(message: dict[str, Any]) -> None:
    plain = body(message, usage=PLAIN_USAGE, service_tier="default")
    assert decode_body(plain, provider="openai").provider_data == {}
    delta = {"role": "assistant", **message}
    data = sse(chunk(delta), chunk({}, "stop"), chunk(None, usage=PLAIN_USAGE), "[DONE]")
    events = decode_stream(data, provider="openai")
    assert not [e for e in events if isinstance(e, ProviderDataEvent)]
    assert streamed(data, "openai").provider_data == {}


# Any split of the bytes

EVERYTHING = sse(
    chunk(
        {
            "role": "assistant",
            "content": "",
            "reasoning": "Thé user",
            "reasoning_details": [_text_piece("Thé user", signature="")],
        }
    ),
    chunk({"reasoning": " asks.", "reasoning_details": [_text_piece(" asks.")]}),
    chunk({"reasoning_details": [{"type": "reasoning.text", "signature": SIGNATURE, "index": 0}]}),
    chunk({"content": "Paris is the capital.", "annotations": [CITATION_A]}),
    chunk({"content": " It is in France — ✓."}),
    chunk({"annotations": [CITATION_B]}, "stop"),
    chunk(None, usage=OPENROUTER_USAGE),
    "[DONE]",
)
EVERYTHING_DATA = {
    "openrouter": {
        REASONING_DETAILS_KEY: [_text_piece("Thé user asks.", signature=SIGNATURE)],
        ANNOTATIONS_KEY: [CITATION_A, CITATION_B],
        USAGE_COST_KEY: OPENROUTER_COST,
    }
}


def test_everything_at_once() -> None:
    response = streamed(EVERYTHING, "openrouter")
    assert response.provider_data == EVERYTHING_DATA
    assert response.content == (
        Reasoning(text="Thé user asks."),
        TextPart(text="Paris is the capital. It is in France — ✓."),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, len(EVERYTHING)), max_size=40))
def test_any_split_of_the_bytes_collects_the_same(cuts: list[int]) -> None:
    decoder = ChatStreamDecoder(provider="openrouter", model="m")
    events: list[StreamEvent] = []
    for piece in split_at(EVERYTHING, cuts):
        events.extend(decoder.feed(piece))
    events.extend(decoder.close())
    response = collect(events, "openrouter")
    assert response == streamed(EVERYTHING, "openrouter")
    assert response.provider_data == EVERYTHING_DATA


# The failed stream keeps what it reported

OPENROUTER_FAILED_STREAM = sse(
    chunk({"role": "assistant", "reasoning_details": [_text_piece("Half a thought")]}),
    chunk({"content": '{"name": "Ad', "annotations": [CITATION_A]}),
    {
        "id": "gen-1",
        "model": "m",
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        "usage": OPENROUTER_USAGE,
    },
)


def test_the_failed_openrouter_stream_keeps_its_cost() -> None:
    target = allama.provider(
        "openrouter",
        api_key="k",
        transport=answering(200, OPENROUTER_FAILED_STREAM, stream=True),
    )
    stream = target.chat_stream(ChatRequest("m").user("x"))
    with pytest.raises(ServerError):
        for _ in stream:
            pass
    metadata = stream.collector.response_metadata()
    assert metadata.provider_data == {
        "openrouter": {
            REASONING_DETAILS_KEY: [_text_piece("Half a thought")],
            ANNOTATIONS_KEY: [CITATION_A],
            USAGE_COST_KEY: OPENROUTER_COST,
        }
    }
    assert metadata.usage == Usage(
        input_tokens=43, output_tokens=36, reasoning_tokens=13, cache_read_tokens=0
    )
    assert stream.collector.partial_response().text() == '{"name": "Ad'


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(OPENROUTER_FAILED_STREAM)), max_size=20))
def test_the_failed_stream_keeps_its_cost_however_it_is_split(cuts: list[int]) -> None:
    decoder = ChatStreamDecoder(provider="openrouter")
    events: list[StreamEvent] = []
    with pytest.raises(ServerError):
        for piece in split_at(OPENROUTER_FAILED_STREAM, cuts):
            events.extend(decoder.feed(piece))
        events.extend(decoder.close())
    kept = {e.key: e.value for e in events if isinstance(e, ProviderDataEvent)}
    assert kept[USAGE_COST_KEY] == OPENROUTER_COST
    assert kept[REASONING_DETAILS_KEY] == [_text_piece("Half a thought")]


def test_an_error_event_keeps_the_cost_of_its_usage() -> None:
    error_event = {
        "error": {
            "message": "Tool choice is required",
            "code": "tool_use_failed",
            "status_code": 400,
        },
        "x_groq": {"usage": {"prompt_tokens": 11, "completion_tokens": 4, "cost": 0.002}},
    }
    data = sse(chunk({"content": "maybe"})) + (
        b"event: error\ndata: " + json.dumps(error_event).encode() + b"\n\n"
    )
    decoder = ChatStreamDecoder(provider="groq")
    events: list[StreamEvent] = []
    with pytest.raises(InvalidRequestError):
        events.extend(decoder.feed(data))
    kept = [(e.namespace, e.key, e.value) for e in events if isinstance(e, ProviderDataEvent)]
    assert kept == [("groq", USAGE_COST_KEY, {"cost": 0.002})]


# Recordings


def test_recorded_openrouter_reasoning_stream_keeps_details_and_cost() -> None:
    case = recording("openrouter/reasoning_stream")
    response = streamed(case["stream"].encode(), "openrouter")
    signature = (
        "Et0BCkgIChACGAIqQA2s7h7tA7IG35fbwVkou9PM2hANVJNUwcEM4q12fTRDK6y3v6YoEvJ+7bko8wnW/"
        "GLsQFXadaJPAEMCpLkhI9ISDLjFkeR1aVUIvdCtyBoMrUTovh0jwk+wpnZWIjANV3e6VVdgbGSsEyyTHO6K"
        "MmVtqqs79f9blnVdJmmMIwMyTi6bEtG59+jTU7v1zlsqQ2IKGZILOlr6adh0Aam7zYttvisys+wjyZZXU1y/"
        "Srz0nmp1cFgVOJe1BLKQI3SSRrjsqQC0uAEUZy0GX0Rq1AXjvIcYAQ=="
    )
    assert response.provider_data == {
        "openrouter": {
            REASONING_DETAILS_KEY: [
                {
                    "type": "reasoning.text",
                    "text": "This is a simple arithmetic question. 2+2 equals 4.",
                    "signature": signature,
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
            ],
            USAGE_COST_KEY: {
                "cost": 0.000669,
                "is_byok": False,
                "cost_details": {
                    "upstream_inference_cost": None,
                    "upstream_inference_prompt_cost": 0.000129,
                    "upstream_inference_completions_cost": 0.00054,
                },
            },
        }
    }
    assert response.content == (
        Reasoning(text="This is a simple arithmetic question. 2+2 equals 4."),
        TextPart(text="2 + 2 = 4"),
    )


@pytest.mark.parametrize(
    ("key", "ticks"),
    [
        ("xai/json_schema_strict", 5656000),
        ("xai/parallel_tool_calls_2", 9043500),
        ("xai/parallel_tool_calls_3", 8431000),
        ("xai/reasoning_content", 70993500),
        ("xai/reasoning_content_stream", 86618500),
        ("xai/text_stream", 3693500),
    ],
)
def test_recorded_xai_cost_in_usd_ticks_is_kept(key: str, ticks: int) -> None:
    case = recording(key)
    if "stream" in case:
        response = streamed(case["stream"].encode(), "xai")
    else:
        response = decode_body(
            json.dumps(case["response_body"]), provider="xai", reasoning_outside_completion=True
        )
    assert response.provider_data == {"xai": {USAGE_COST_KEY: {"cost_in_usd_ticks": ticks}}}


@pytest.mark.parametrize(
    "key",
    [
        "openai/plain_text_system_prompt",
        "openai/tool_choice_required",
        "openai/refusal_strict_schema",
        "azure_openai/chat_reasoning_deployment",
        "vllm/tool_call_auto",
    ],
)
def test_recorded_empty_annotations_leave_no_key(key: str) -> None:
    case = recording(key)
    response = decode_body(json.dumps(case["response_body"]), provider="openai")
    assert ANNOTATIONS_KEY not in response.provider_data.get("openai", {})
    assert USAGE_COST_KEY not in response.provider_data.get("openai", {})
