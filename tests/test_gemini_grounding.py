"""The Gemini candidate's metadata: `citationMetadata`, `groundingMetadata` and
`urlContextMetadata` of the response candidate, kept verbatim in `provider_data["gemini"]`.

Bodies keep them as sent (a value that says nothing makes no key; other candidates keep
theirs inside them). Streams put them together over the chunks (citation lists appended,
a resent list not doubled; grounding and URL context whole, the last one that says
something) and collect to what the same response's body keeps, however the bytes are split.
A safety-filtered response and a blocked prompt decode as before. The replay reads the
recorded Gemini cases and checks that each keeps exactly the metadata its candidate carries.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allama.adapters.gemini import _decode
from allama.adapters.gemini._decode import (
    CITATION_METADATA_KEY,
    GROUNDING_METADATA_KEY,
    URL_CONTEXT_METADATA_KEY,
    decode_response,
)
from allama.adapters.gemini._stream import decode_stream
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    BlockStart,
    BlockStop,
    Finish,
    FinishReason,
    ProviderDataEvent,
    ResponseStart,
    StreamBlockType,
    TextDelta,
    TextPart,
    Usage,
    UsageEvent,
)
from test_gemini_decode import (
    RESPONSES,
    STREAMS,
    Case,
    _keys,
    _main_candidate,
    array,
    candidate,
    collect,
    decode,
    feed_split,
    response,
    sse,
    stream_chunks,
)

# What Gemini sends, in the shapes its documentation and SDK types give.

CITATIONS: dict[str, Any] = {
    "citationSources": [
        {
            "startIndex": 12,
            "endIndex": 131,
            "uri": "https://github.com/example/repo/blob/main/sort.py",
            "license": "mit",
        },
        {"startIndex": 140, "endIndex": 260, "uri": "https://example.org/essay"},
    ]
}
VERTEX_CITATIONS: dict[str, Any] = {
    "citations": [
        {
            "startIndex": 3,
            "endIndex": 97,
            "uri": "https://example.com/book",
            "title": "A Book",
            "license": "CC-BY-4.0",
            "publicationDate": {"year": 2019, "month": 4, "day": 2},
        }
    ]
}
GROUNDING: dict[str, Any] = {
    "webSearchQueries": ["UEFA Euro 2024 winner", "who won euro 2024"],
    "searchEntryPoint": {"renderedContent": '<style>.container{}</style><div class="c">…</div>'},
    "groundingChunks": [
        {
            "web": {
                "uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/a1",
                "title": "aljazeera.com",
            }
        },
        {
            "web": {
                "uri": "https://vertexaisearch.cloud.google.com/grounding-api-redirect/b2",
                "title": "uefa.com",
            }
        },
    ],
    "groundingSupports": [
        {
            "segment": {"startIndex": 0, "endIndex": 55, "text": "Spain won Euro 2024."},
            "groundingChunkIndices": [0, 1],
            "confidenceScores": [0.97, 0.91],
        },
        {
            "segment": {"partIndex": 0, "startIndex": 56, "endIndex": 110, "text": "Their 4th."},
            "groundingChunkIndices": [1],
        },
    ],
    "retrievalMetadata": {},
    "futureField": {"kept": True},
}
URL_CONTEXT: dict[str, Any] = {
    "urlMetadata": [
        {
            "retrievedUrl": "https://example.com/a",
            "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
        },
        {
            "retrievedUrl": "https://example.com/b",
            "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR",
        },
    ]
}
ALL_THREE = {
    "citationMetadata": CITATIONS,
    "groundingMetadata": GROUNDING,
    "urlContextMetadata": URL_CONTEXT,
}
KEPT = {
    CITATION_METADATA_KEY: CITATIONS,
    GROUNDING_METADATA_KEY: GROUNDING,
    URL_CONTEXT_METADATA_KEY: URL_CONTEXT,
}


def with_metadata(body: dict[str, Any], index: int = 0, **fields: Any) -> dict[str, Any]:
    """`body` with `fields` set on its `index`-th listed candidate (deep-copied values)."""
    body["candidates"][index].update(copy.deepcopy(fields))
    return body


# Keys


def test_the_keys_are_exported_beside_the_others() -> None:
    assert (CITATION_METADATA_KEY, GROUNDING_METADATA_KEY, URL_CONTEXT_METADATA_KEY) == (
        "citation_metadata",
        "grounding_metadata",
        "url_context_metadata",
    )
    for name in ("CITATION_METADATA_KEY", "GROUNDING_METADATA_KEY", "URL_CONTEXT_METADATA_KEY"):
        assert name in _decode.__all__


# Bodies


def test_a_body_keeps_the_three_of_the_response_candidate_verbatim() -> None:
    body = with_metadata(response([{"text": "Spain won Euro 2024."}]), **ALL_THREE)
    result = decode(body)
    assert result.content == (TextPart(text="Spain won Euro 2024."),)
    assert result.finish_reason == FinishReason.STOP
    assert result.provider_data == {"gemini": KEPT}
    assert result.provider_value("gemini", "grounding_metadata") == GROUNDING


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("citationMetadata", CITATIONS, CITATION_METADATA_KEY),
        ("citationMetadata", VERTEX_CITATIONS, CITATION_METADATA_KEY),
        ("groundingMetadata", GROUNDING, GROUNDING_METADATA_KEY),
        ("urlContextMetadata", URL_CONTEXT, URL_CONTEXT_METADATA_KEY),
    ],
)
def test_each_alone_is_kept_under_its_key(field: str, value: Any, key: str) -> None:
    body = with_metadata(response([{"text": "x"}]), **{field: value})
    assert decode(body).provider_data == {"gemini": {key: value}}


def test_without_any_there_is_no_key() -> None:
    result = decode(response([{"text": "x"}]))
    assert result.provider_data == {}


@pytest.mark.parametrize(
    "value",
    [
        None,
        {},
        [],
        "",
        {"citations": []},
        {"citationSources": [], "other": None},
        {"webSearchQueries": [], "groundingChunks": [], "searchEntryPoint": {}},
        {"urlMetadata": []},
    ],
)
def test_a_value_that_says_nothing_makes_no_key(value: Any) -> None:
    body = with_metadata(
        response([{"text": "x"}]),
        citationMetadata=value,
        groundingMetadata=value,
        urlContextMetadata=value,
    )
    assert decode(body).provider_data == {}


def test_a_value_that_says_something_is_kept_with_its_empty_fields() -> None:
    grounding = {"webSearchQueries": ["q"], "groundingChunks": [], "retrievalMetadata": {}}
    body = with_metadata(response([{"text": "x"}]), groundingMetadata=grounding)
    assert decode(body).provider_data == {"gemini": {GROUNDING_METADATA_KEY: grounding}}


def test_other_candidates_keep_their_metadata_inside_them() -> None:
    first = candidate([{"text": "one"}], finishReason="STOP", **copy.deepcopy(ALL_THREE))
    second = candidate(
        [{"text": "two"}],
        finishReason="STOP",
        index=1,
        citationMetadata=VERTEX_CITATIONS,
        groundingMetadata={"webSearchQueries": ["another"]},
    )
    result = decode({"candidates": [second, first]})
    assert result.text() == "one"
    assert result.provider_data == {"gemini": {"candidates": [second], **KEPT}}


def test_only_other_candidates_carrying_metadata_make_no_key_of_it() -> None:
    first = candidate([{"text": "one"}], finishReason="STOP")
    second = candidate([{"text": "two"}], index=1, groundingMetadata=GROUNDING)
    result = decode({"candidates": [first, second]})
    assert result.provider_data == {"gemini": {"candidates": [second]}}


def test_without_index_zero_the_first_listed_gives_its_metadata() -> None:
    first = candidate([{"text": "one"}], index=3, groundingMetadata=GROUNDING)
    second = candidate([{"text": "two"}], index=4, citationMetadata=CITATIONS)
    result = decode({"candidates": [first, second]})
    assert result.provider_data == {
        "gemini": {"candidates": [second], GROUNDING_METADATA_KEY: GROUNDING}
    }


def test_kept_parts_and_metadata_sit_side_by_side() -> None:
    parts = [
        {"text": "Running it:"},
        {"executableCode": {"language": "PYTHON", "code": "print(2)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}},
    ]
    body = with_metadata(response(parts), groundingMetadata=GROUNDING)
    assert decode(body).provider_data == {
        "gemini": {"parts": parts[1:], GROUNDING_METADATA_KEY: GROUNDING}
    }


# Filters and blocks decode as before


def test_a_safety_filtered_candidate_decodes_as_before() -> None:
    ratings = [{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "HIGH", "blocked": True}]
    body = response(None, finishReason="SAFETY")
    body["candidates"][0].update(content={}, safetyRatings=ratings)
    result = decode(body)
    assert result.content == ()
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {"gemini": {"finish_reason": "SAFETY"}}
    streamed = collect(decode_stream(sse(body)))
    assert streamed == result


def test_a_recitation_keeps_its_citations_beside_its_reason() -> None:
    body = response(
        [{"text": "def quicksort"}], finishReason="RECITATION", finishMessage="Recited."
    )
    with_metadata(body, citationMetadata=CITATIONS)
    result = decode(body)
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {
            "finish_reason": "RECITATION",
            DECLINE_EXPLANATION_KEY: "Recited.",
            CITATION_METADATA_KEY: CITATIONS,
        }
    }
    assert result.decline_explanation() == "Recited."
    first = meta_chunk([{"text": "def "}], citationMetadata=CITATIONS)
    last = meta_chunk(
        [{"text": "quicksort"}],
        finishReason="RECITATION",
        finishMessage="Recited.",
        usageMetadata=body["usageMetadata"],
    )
    assert collect(decode_stream(sse(first, last))).provider_data == result.provider_data


def test_a_blocked_prompt_decodes_as_before() -> None:
    body = {
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
        "modelVersion": "gemini-2.5-flash",
    }
    result = decode(body)
    assert result.content == ()
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {
            "block_reason": "SAFETY",
            DECLINE_EXPLANATION_KEY: "Gemini blocked the prompt (block reason SAFETY).",
        }
    }
    assert result.usage == Usage(input_tokens=7, output_tokens=0)
    assert collect(decode_stream(sse(body))) == result


def _by_key(key: str) -> Case:
    found = [case for case in RESPONSES if case.key == key]
    if not found:
        pytest.skip(f"the recorded case {key} is not in the corpus")
    return found[0]


def test_the_recorded_safety_finish_decodes_as_before() -> None:
    case = _by_key("gemini/finish_safety")
    result = decode_response(200, {}, case.body, provider="gemini")
    assert result.content == ()
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {"gemini": {"finish_reason": "SAFETY"}}


def test_the_recorded_vertex_prompt_block_decodes_as_before() -> None:
    case = _by_key("gemini/vertex_prompt_blocked_model_armor")
    feedback = case.data["response_body"]["promptFeedback"]
    result = decode_response(200, {}, case.body, provider="vertex-gemini")
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {
            "block_reason": feedback["blockReason"],
            DECLINE_EXPLANATION_KEY: feedback["blockReasonMessage"],
        }
    }


# Streams


def meta_chunk(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A stream chunk whose candidate 0 holds `parts` and the candidate `fields` given
    (`finishReason`, `citationMetadata`, ...); `usageMetadata` goes to the chunk."""
    usage = fields.pop("usageMetadata", None)
    out: dict[str, Any] = {"candidates": [candidate(parts, **copy.deepcopy(fields))]}
    if usage is not None:
        out["usageMetadata"] = usage
    return out


SOURCE_A = {"startIndex": 0, "endIndex": 8, "uri": "https://a.example", "license": "mit"}
SOURCE_B = {"startIndex": 9, "endIndex": 20, "uri": "https://b.example"}
SOURCE_C = {"startIndex": 21, "endIndex": 30, "uri": "https://c.example", "title": "C"}
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def test_citations_over_several_chunks_and_grounding_in_the_last() -> None:
    chunks = [
        {
            **meta_chunk([{"text": "Alpha, "}], citationMetadata={"citationSources": [SOURCE_A]}),
            "modelVersion": "gemini-2.5-flash",
            "responseId": "r1",
        },
        meta_chunk([{"text": "beta "}]),
        meta_chunk(
            [{"text": "and gamma."}], citationMetadata={"citationSources": [SOURCE_B, SOURCE_C]}
        ),
        meta_chunk(
            [],
            finishReason="STOP",
            groundingMetadata=GROUNDING,
            urlContextMetadata=URL_CONTEXT,
            usageMetadata=USAGE,
        ),
    ]
    citations = {"citationSources": [SOURCE_A, SOURCE_B, SOURCE_C]}
    body = response(
        [{"text": "Alpha, beta and gamma."}],
        usageMetadata=USAGE,
        modelVersion="gemini-2.5-flash",
        responseId="r1",
    )
    with_metadata(
        body,
        citationMetadata=citations,
        groundingMetadata=GROUNDING,
        urlContextMetadata=URL_CONTEXT,
    )
    events = decode_stream(sse(*chunks))
    assert events == [
        ResponseStart(id="r1", model="gemini-2.5-flash"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Alpha, "),
        TextDelta(index=0, text="beta "),
        TextDelta(index=0, text="and gamma."),
        UsageEvent(usage=Usage(input_tokens=10, output_tokens=5)),
        BlockStop(index=0),
        ProviderDataEvent(namespace="gemini", key=CITATION_METADATA_KEY, value=citations),
        ProviderDataEvent(namespace="gemini", key=GROUNDING_METADATA_KEY, value=GROUNDING),
        ProviderDataEvent(namespace="gemini", key=URL_CONTEXT_METADATA_KEY, value=URL_CONTEXT),
        Finish(finish_reason=FinishReason.STOP),
    ]
    expected = decode(body)
    assert expected.provider_data == {
        "gemini": {
            CITATION_METADATA_KEY: citations,
            GROUNDING_METADATA_KEY: GROUNDING,
            URL_CONTEXT_METADATA_KEY: URL_CONTEXT,
        }
    }
    assert collect(events) == expected
    assert collect(decode_stream(array(*chunks))) == expected


def test_vertex_citations_append_under_their_own_name() -> None:
    chunks = [
        meta_chunk([{"text": "one "}], citationMetadata={"citations": [SOURCE_A]}),
        meta_chunk(
            [{"text": "two"}],
            finishReason="STOP",
            citationMetadata={"citations": [SOURCE_B]},
        ),
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_data == {
        "gemini": {CITATION_METADATA_KEY: {"citations": [SOURCE_A, SOURCE_B]}}
    }


def test_a_resent_citation_list_is_not_doubled() -> None:
    # Cumulative chunks: each resends what came before and adds its own.
    chunks = [
        meta_chunk([{"text": "one "}], citationMetadata={"citationSources": [SOURCE_A]}),
        meta_chunk([{"text": "two "}], citationMetadata={"citationSources": [SOURCE_A, SOURCE_B]}),
        meta_chunk([{"text": "two "}], citationMetadata={"citationSources": [SOURCE_A, SOURCE_B]}),
        meta_chunk(
            [{"text": "three"}],
            finishReason="STOP",
            citationMetadata={"citationSources": [SOURCE_A, SOURCE_B, SOURCE_C]},
        ),
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_value("gemini", CITATION_METADATA_KEY) == {
        "citationSources": [SOURCE_A, SOURCE_B, SOURCE_C]
    }


def test_a_chunk_that_does_not_resend_the_whole_list_appends_all_of_its_own() -> None:
    chunks = [
        meta_chunk([{"text": "a"}], citationMetadata={"citationSources": [SOURCE_A, SOURCE_B]}),
        meta_chunk(
            [{"text": "b"}],
            finishReason="STOP",
            citationMetadata={"citationSources": [SOURCE_A, SOURCE_C]},
        ),
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_value("gemini", CITATION_METADATA_KEY) == {
        "citationSources": [SOURCE_A, SOURCE_B, SOURCE_A, SOURCE_C]
    }


def test_other_citation_fields_take_the_last_value() -> None:
    chunks = [
        meta_chunk([{"text": "a"}], citationMetadata={"citationSources": [SOURCE_A], "n": 1}),
        meta_chunk([{"text": "b"}], citationMetadata={"n": 2}),
        meta_chunk([], finishReason="STOP", citationMetadata={"citationSources": [SOURCE_B]}),
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_value("gemini", CITATION_METADATA_KEY) == {
        "citationSources": [SOURCE_A, SOURCE_B],
        "n": 2,
    }


def test_grounding_before_a_usage_only_chunk_or_an_empty_one_is_kept() -> None:
    chunks = [
        meta_chunk([{"text": "Spain "}], groundingMetadata={}),
        meta_chunk([{"text": "won."}], groundingMetadata=GROUNDING, urlContextMetadata=URL_CONTEXT),
        meta_chunk(
            [],
            finishReason="STOP",
            groundingMetadata={"webSearchQueries": []},
            urlContextMetadata={"urlMetadata": []},
        ),
        {"usageMetadata": USAGE},
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.text() == "Spain won."
    assert result.provider_data == {
        "gemini": {GROUNDING_METADATA_KEY: GROUNDING, URL_CONTEXT_METADATA_KEY: URL_CONTEXT}
    }
    assert result.usage == Usage(input_tokens=10, output_tokens=5)


def test_a_later_grounding_replaces_an_earlier_one_whole() -> None:
    early = {"webSearchQueries": ["first query"], "groundingChunks": [{"web": {"uri": "u"}}]}
    chunks = [
        meta_chunk([{"text": "a"}], groundingMetadata=early),
        meta_chunk([{"text": "b"}], finishReason="STOP", groundingMetadata=GROUNDING),
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_data == {"gemini": {GROUNDING_METADATA_KEY: GROUNDING}}


def test_other_candidates_metadata_stays_out_of_the_stream() -> None:
    other = candidate(
        [{"text": "other"}],
        index=1,
        citationMetadata={"citationSources": [SOURCE_C]},
        groundingMetadata={"webSearchQueries": ["other"]},
    )
    chunks = [
        {"candidates": [candidate([{"text": "main"}]), other]},
        {"candidates": [other]},
        {"candidates": [candidate([], finishReason="STOP", groundingMetadata=GROUNDING)]},
    ]
    result = collect(decode_stream(sse(*chunks)))
    assert result.content == (TextPart(text="main"),)
    assert result.provider_data == {"gemini": {GROUNDING_METADATA_KEY: GROUNDING}}


def test_a_stream_without_metadata_has_no_key() -> None:
    chunks = [meta_chunk([{"text": "a"}]), meta_chunk([{"text": "b"}], finishReason="STOP")]
    events = decode_stream(sse(*chunks))
    assert not any(isinstance(event, ProviderDataEvent) for event in events)


def test_an_unfinished_stream_still_reports_its_metadata() -> None:
    chunks = [meta_chunk([{"text": "a"}], groundingMetadata=GROUNDING)]
    events = decode_stream(sse(*chunks))
    assert not any(isinstance(event, Finish) for event in events)
    assert events[-1] == ProviderDataEvent(
        namespace="gemini", key=GROUNDING_METADATA_KEY, value=GROUNDING
    )


def test_citations_from_many_chunks_are_each_kept_once_in_order() -> None:
    count = 2_000
    sources = [{"startIndex": i, "endIndex": i + 1, "uri": f"https://x/{i}"} for i in range(count)]
    chunks = [
        meta_chunk([{"text": "x"}], citationMetadata={"citationSources": [source]})
        for source in sources
    ]
    chunks.append(meta_chunk([], finishReason="STOP"))
    result = collect(decode_stream(sse(*chunks)))
    assert result.provider_value("gemini", CITATION_METADATA_KEY) == {"citationSources": sources}
    assert result.text() == "x" * count


# Any split of the bytes collects to the body


@dataclass
class Generated:
    body: dict[str, Any]
    chunks: list[dict[str, Any]]


_words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
_uris = st.sampled_from(["https://a.example", "https://b.example/é", "https://c.example/東京"])


@st.composite
def generated(draw: st.DrawFn) -> Generated:
    """A grounded response and the chunks Gemini could stream it as: text pieces grouped
    into chunks, each piece citing 0 to 2 sources (indexes into the whole text), each chunk
    carrying its own sources (or, cumulative, all so far); the grounding and URL context
    whole on one chunk, earlier chunks with nothing or an older version, later ones with
    nothing; the finish in the last chunk, the usage maybe in a trailing chunk."""
    list_name = draw(st.sampled_from(["citationSources", "citations"]))
    cumulative = draw(st.booleans())
    pieces = draw(st.lists(_words, min_size=1, max_size=8))
    cited: list[list[dict[str, Any]]] = []
    at = 0
    for piece in pieces:
        sources = [
            {"startIndex": at, "endIndex": at + len(piece), "uri": draw(_uris)}
            for _ in range(draw(st.integers(0, 2)))
        ]
        if sources and draw(st.booleans()):
            sources[0]["license"] = "mit"
        cited.append(sources)
        at += len(piece)
    bounds = sorted({0, len(pieces), *draw(st.lists(st.integers(1, len(pieces)), max_size=4))})
    groups = list(itertools.pairwise(bounds))
    grounding = draw(st.sampled_from([None, GROUNDING, {"webSearchQueries": ["q"]}]))
    url_context = draw(st.sampled_from([None, URL_CONTEXT]))
    grounding_at = draw(st.integers(0, len(groups) - 1))
    url_at = draw(st.integers(0, len(groups) - 1))
    chunks: list[dict[str, Any]] = []
    so_far: list[dict[str, Any]] = []
    for n, (a, b) in enumerate(groups):
        fields: dict[str, Any] = {}
        own = [source for sources in cited[a:b] for source in sources]
        so_far.extend(own)
        if own:
            fields["citationMetadata"] = {list_name: list(so_far) if cumulative else own}
        elif draw(st.integers(0, 3)) == 0:
            fields["citationMetadata"] = {list_name: []}
        for field, value, where in (
            ("groundingMetadata", grounding, grounding_at),
            ("urlContextMetadata", url_context, url_at),
        ):
            if value is not None and n == where:
                fields[field] = value
            elif value is not None and n < where and draw(st.booleans()):
                fields[field] = {"webSearchQueries": ["older"]}
            elif draw(st.integers(0, 3)) == 0:
                fields[field] = {}
        chunks.append(meta_chunk([{"text": piece} for piece in pieces[a:b]], **fields))
    chunks[0]["modelVersion"] = "gemini-2.5-flash"
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    if draw(st.booleans()):
        chunks.append({"usageMetadata": USAGE})
    else:
        chunks[-1]["usageMetadata"] = USAGE
    body = response(
        [{"text": "".join(pieces)}], usageMetadata=USAGE, modelVersion="gemini-2.5-flash"
    )
    del body["responseId"]
    metadata: dict[str, Any] = {}
    if so_far:
        metadata["citationMetadata"] = {list_name: so_far}
    if grounding is not None:
        metadata["groundingMetadata"] = grounding
    if url_context is not None:
        metadata["urlContextMetadata"] = url_context
    with_metadata(body, **metadata)
    return Generated(body, chunks)


@settings(max_examples=150, deadline=None)
@given(case=generated(), framing=st.sampled_from(["sse", "array"]), data=st.data())
def test_any_split_of_the_bytes_collects_to_the_body(
    case: Generated, framing: str, data: st.DataObject
) -> None:
    ascii = data.draw(st.booleans(), label="ascii")
    raw = sse(*case.chunks, ascii=ascii) if framing == "sse" else array(*case.chunks, ascii=ascii)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=25), label="cuts")
    expected = decode(case.body)
    kept = _expected_from_body(case.body)
    assert _metadata_of(expected.provider_data) == kept == _expected_from_chunks(case.chunks)
    whole = collect(decode_stream(raw))
    assert whole == expected
    assert collect(feed_split(raw, cuts)) == expected


# Replay: each recording keeps exactly the metadata its candidate 0 carries


_FIELDS = {
    "citationMetadata": CITATION_METADATA_KEY,
    "groundingMetadata": GROUNDING_METADATA_KEY,
    "urlContextMetadata": URL_CONTEXT_METADATA_KEY,
}


def _says(value: Any) -> bool:
    empty = (None, "", [], {})
    if isinstance(value, dict):
        return any(field not in empty for field in value.values())
    return value not in empty


def _expected_from_body(body: dict[str, Any]) -> dict[str, Any]:
    cand = _main_candidate(body, first_listed=True) or {}
    return {key: cand[field] for field, key in _FIELDS.items() if _says(cand.get(field))}


def _expected_from_chunks(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Read again: grounding and URL context the last that says something; citation lists
    appended chunk after chunk, a chunk that resends the whole list adding what follows."""
    out: dict[str, Any] = {}
    for piece in chunks:
        cand = _main_candidate(piece, first_listed=False) or {}
        for field, key in _FIELDS.items():
            value = cand.get(field)
            if not _says(value):
                continue
            held = out.get(key)
            if key != CITATION_METADATA_KEY or not isinstance(held, dict):
                out[key] = copy.deepcopy(value)
                continue
            for name, items in value.items():
                before = held.get(name)
                if isinstance(items, list) and isinstance(before, list):
                    resent = items[: len(before)] == before
                    before.extend(items[len(before) :] if resent else items)
                else:
                    held[name] = copy.deepcopy(items)
    return out


def test_the_replay_reading_of_chunks_agrees_with_the_synthetic_stream() -> None:
    chunks = [
        meta_chunk([{"text": "a"}], citationMetadata={"citationSources": [SOURCE_A]}),
        meta_chunk([{"text": "b"}], citationMetadata={"citationSources": [SOURCE_A, SOURCE_B]}),
        meta_chunk([], finishReason="STOP", groundingMetadata=GROUNDING),
        {"usageMetadata": USAGE},
    ]
    expected = {
        CITATION_METADATA_KEY: {"citationSources": [SOURCE_A, SOURCE_B]},
        GROUNDING_METADATA_KEY: GROUNDING,
    }
    assert _expected_from_chunks(chunks) == expected
    assert collect(decode_stream(sse(*chunks))).provider_data["gemini"] == expected


def _metadata_of(provider_data: dict[str, Any]) -> dict[str, Any]:
    kept = provider_data.get("gemini", {})
    return {key: kept[key] for key in _FIELDS.values() if key in kept}


@pytest.mark.parametrize("case", RESPONSES, ids=_keys(RESPONSES))
def test_a_recorded_response_keeps_exactly_its_metadata(case: Case) -> None:
    body = case.data["response_body"]
    result = decode_response(200, {}, case.body, provider="gemini")
    assert _metadata_of(result.provider_data) == _expected_from_body(body)
    # The other candidates stay whole, metadata and all.
    candidates = body.get("candidates") or []
    kept = result.provider_value("gemini", "candidates")
    if len(candidates) > 1:
        assert isinstance(kept, list)
        assert len(kept) == len(candidates) - 1
        assert all(other in candidates for other in kept)
    else:
        assert kept is None


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_a_recorded_stream_keeps_exactly_its_metadata(case: Case) -> None:
    assert case.stream is not None
    chunks = stream_chunks(case.stream.decode())
    result = collect(decode_stream(case.stream, provider="gemini"))
    assert _metadata_of(result.provider_data) == _expected_from_chunks(chunks)


def test_a_recording_with_grounding_added_keeps_it() -> None:
    """The corpus has no grounded recording; one made from a recorded stream, with citations
    on two chunks and grounding on the last, keeps what was added, and its body reading
    agrees."""
    found = [case for case in STREAMS if case.key == "gemini/stream_sse_text"]
    if not found:
        pytest.skip("the recorded case gemini/stream_sse_text is not in the corpus")
    assert found[0].stream is not None
    chunks = stream_chunks(found[0].stream.decode())
    with_candidate = [n for n, piece in enumerate(chunks) if piece.get("candidates")]
    assert with_candidate
    first, last = with_candidate[0], with_candidate[-1]
    chunks[first]["candidates"][0]["citationMetadata"] = {"citationSources": [SOURCE_A]}
    chunks[last]["candidates"][0].setdefault("citationMetadata", {"citationSources": []})
    chunks[last]["candidates"][0]["citationMetadata"]["citationSources"].append(SOURCE_B)
    chunks[last]["candidates"][0]["groundingMetadata"] = GROUNDING
    result = collect(decode_stream(sse(*chunks, ascii=False), provider="gemini"))
    expected = _expected_from_chunks(chunks)
    assert _metadata_of(result.provider_data) == expected
    assert expected[GROUNDING_METADATA_KEY] == GROUNDING
    assert expected[CITATION_METADATA_KEY] == {"citationSources": [SOURCE_A, SOURCE_B]}
    assert json.loads(json.dumps(result.provider_data)) == result.provider_data
