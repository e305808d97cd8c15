"""Streams and decisions, as a reviewer found them: the preview (`partial`) keeps its word
(a completed part shown is a validated one; the type's own exception is no failure of the
preview), a connection cut after the stream's finish keeps the paid answer, and decisions
give probabilities where a forced tool had none and match a JSON answer loosely under
`repair`."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

import httpx2
import pytest
from annotated_types import Len
from pydantic import BaseModel, Field, model_validator

import allama
from allama import (
    ChatRequest,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    ParseError,
    SchemaEnforcement,
    UnsupportedError,
)
from allama.errors import NetworkError, RequestTimeoutError
from allama.extract import EXTRACTION_TOOL
from allama.mock import MockStreamingProvider
from allama.types import (
    BlockStart,
    BlockStop,
    Finish,
    ResponseStart,
    StreamBlockType,
    TextDelta,
    Usage,
    UsageEvent,
)

# The preview: what `partial` shows, and what it raises.


def text_events(text: str, size: int) -> list[Any]:
    events: list[Any] = [ResponseStart(), BlockStart(index=0, block_type=StreamBlockType.TEXT)]
    events += [TextDelta(index=0, text=text[i : i + size]) for i in range(0, len(text), size)]
    events += [
        BlockStop(index=0),
        UsageEvent(usage=Usage(input_tokens=11, output_tokens=7)),
        Finish(finish_reason="stop"),
    ]
    return events


def streamed(tp: Any, text: str, size: int) -> tuple[list[Any], Callable[[], Any]]:
    """Every `partial` read after each event, and the stream's `finish`."""
    provider = MockStreamingProvider.with_stream(text_events(text, size))
    seen: list[Any] = []
    with allama.extract_stream(provider, tp, ChatRequest("m").user("x")) as stream:
        for _ in stream:
            seen.append(stream.partial)
        return seen, stream.finish


async def astreamed(tp: Any, text: str, size: int) -> tuple[list[Any], BaseException]:
    provider = MockStreamingProvider.with_stream(text_events(text, size))
    seen: list[Any] = []
    async with allama.aextract_stream(provider, tp, ChatRequest("m").user("x")) as stream:
        async for _ in stream:
            seen.append(stream.partial)
        try:
            await stream.finish()
        except BaseException as raised:  # the type's own exception
            return seen, raised
    raise AssertionError("finish() returned")


class Looked(BaseModel):
    k: str

    @model_validator(mode="after")
    def lookup(self) -> Looked:
        {"ok": 1}[self.k]  # the type's own code: a KeyError for a key it does not know
        return self


class Looking(BaseModel):
    rows: list[Looked]
    n: int


SIZES = (1, 3, 7, 1000)


@pytest.mark.parametrize("size", SIZES)
def test_a_validator_that_raises_in_a_row_reads_as_not_valid_yet_and_finish_keeps_the_record(
    size: int,
) -> None:
    """Reading `partial` raised the type's `KeyError` with no record on it (`from_error`
    gave `None`), mid-stream, where a call not streamed fails only at the end with one."""
    text = '{"rows": [{"k": "ok"}, {"k": "bad"}], "n": 1}'
    seen, finish = streamed(Looking, text, size)
    shown = [p for p in seen if p is not None and "rows" in p.model_fields_set]
    assert shown and all(row.k == "ok" for p in shown for row in p.rows[:-1])
    with pytest.raises(KeyError) as raised:
        finish()
    record = ExtractionMetadata.from_error(raised.value)
    assert record is not None and record.passes == 1
    assert record.usage == Usage(input_tokens=11, output_tokens=7)


@pytest.mark.parametrize("size", SIZES)
def test_a_root_validator_that_raises_reads_as_not_valid_yet_async_too(size: int) -> None:
    """The value itself, validated as it completes and again as `finish()` will (the
    settle): both raised the type's exception out of `partial`."""
    seen, raised = asyncio.run(astreamed(Looked, '{"k": "bad"}', size))
    assert isinstance(raised, KeyError)
    record = ExtractionMetadata.from_error(raised)
    assert record is not None and record.passes == 1
    assert seen[-1] is not None and seen[-1].k == "bad"  # shown as built, not validated
    seen, raised = asyncio.run(astreamed(Looking, '{"rows": [{"k": "bad"}], "n": 1}', size))
    assert isinstance(raised, KeyError) and ExtractionMetadata.from_error(raised) is not None


class Item(BaseModel):
    name: str
    price: int = Field(gt=0)


class Span(BaseModel):
    lo: int
    hi: int

    @model_validator(mode="after")
    def ordered(self) -> Span:
        if self.hi < self.lo:
            raise ValueError("hi < lo")
        return self


class Order(BaseModel):
    items: list[Item]
    spans: list[Span]
    first: Span
    short: Annotated[list[int], Len(max_length=2)]
    note: str


ORDER = {
    "items": [{"name": "a", "price": -1}, {"name": "b", "price": 2}],
    "spans": [{"lo": 5, "hi": 1}, {"lo": 1, "hi": 2}],
    "first": {"lo": 9, "hi": 0},
    "short": [1, 2, 3],
    "note": "x",
}


def completed_parts(value: Order) -> list[Any]:
    """The parts of a preview that completed: every item but the last of each list (which
    may be open), and the fields before the last one that arrived."""
    arrived = [name for name in Order.model_fields if name in value.model_fields_set]
    parts: list[Any] = []
    for name in arrived[:-1]:
        parts.append(getattr(value, name))
    for name in ("items", "spans"):
        if name in arrived:
            parts += getattr(value, name)[:-1]
    return parts


@pytest.mark.parametrize("size", SIZES)
def test_a_completed_part_that_does_not_validate_is_left_out_of_the_preview(size: int) -> None:
    """They were shown as if validated: a row with `price=-1` as an `Item` with `price`
    unset (reading it raised `AttributeError`), a span its validator rejects, a list
    longer than its bound."""
    seen, finish = streamed(Order, json.dumps(ORDER), size)
    for value in seen:
        if value is None:
            continue
        for part in completed_parts(value):
            if isinstance(part, Item | Span):
                type(part).model_validate(part.model_dump())  # a validated value
                assert part.model_fields_set == set(type(part).model_fields)
            elif isinstance(part, list):
                assert len(part) <= 2  # `short`'s bound (the lists of rows hold two at most)
    last = seen[-1]
    assert last.items == [Item(name="b", price=2)]
    assert last.items[0].price == 2
    assert last.spans == [Span(lo=1, hi=2)]
    assert "first" not in last.model_fields_set and "short" not in last.model_fields_set
    assert last.note == "x"
    with pytest.raises(ParseError):
        finish()


@pytest.mark.parametrize("size", SIZES)
def test_the_value_itself_ended_invalid_stays_shown_as_built(size: int) -> None:
    """Nothing to leave it out of: the preview keeps what arrived, `finish()` says why."""
    seen, finish = streamed(Span, '{"lo": 5, "hi": 1}', size)
    assert (seen[-1].lo, seen[-1].hi) == (5, 1)
    with pytest.raises(ParseError):
        finish()
    seen, _ = streamed(list[Item], '[{"name": "a", "price": -1}, {"name": "b", "price": 2}]', size)
    assert seen[-1] == [Item(name="b", price=2)]


# A connection cut after the stream's finish.


class Cut(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A streamed body that breaks after `chunks` (the connection reset, or a read that
    times out)."""

    def __init__(self, chunks: list[bytes], failure: Exception) -> None:
        self.chunks = chunks
        self.failure = failure

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise self.failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        raise self.failure


def cut_provider(name: str, chunks: list[bytes], failure: Exception) -> allama.HttpProvider:
    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=Cut(chunks, failure))

    transport = allama.Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider(name, api_key="k", transport=transport)


ANSWER = '{"name": "Ada", "year": 1843}'


def anthropic_events(text: str) -> list[bytes]:
    """Anthropic's stream of `text`, up to `message_delta` (its finish and its usage)."""

    def event(kind: str, payload: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()

    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    return [
        event("message_start", {"message": message}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        *(
            event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": text[i : i + 4]}},
            )
            for i in range(0, len(text), 4)
        ),
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta",
            {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 40}},
        ),
    ]


def openai_chunks(text: str, *, finish: bool, usage: bool) -> list[bytes]:
    """OpenAI's Chat Completions stream of `text`, never its `[DONE]`."""

    def chunk(delta: dict[str, Any] | None, reason: str | None = None, **more: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": reason}]
        body = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
        return f"data: {json.dumps({**body, 'choices': choices, **more})}\n\n".encode()

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
    if finish:
        out.append(chunk({}, "stop"))
    if usage:
        tokens = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        out.append(chunk(None, usage=tokens))
    return out


class Person(BaseModel):
    name: str
    year: int


FAILURES = [
    pytest.param(lambda: httpx2.RemoteProtocolError("peer closed connection"), id="reset"),
    pytest.param(lambda: httpx2.ReadTimeout("timed out"), id="read-timeout"),
]

UNKNOWN = "no token counts came with a call that was made (its answer cut off, say)"


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize(
    ("name", "chunks", "model", "usage"),
    [
        pytest.param(
            "anthropic",
            anthropic_events(ANSWER),
            "claude-sonnet-4-5",
            Usage(input_tokens=100, output_tokens=40),
            id="anthropic-before-message_stop",
        ),
        pytest.param(
            "openai",
            openai_chunks(ANSWER, finish=True, usage=True),
            "gpt-4o-mini",
            Usage(input_tokens=11, output_tokens=7),
            id="openai-after-usage",
        ),
        pytest.param(
            "openai",
            openai_chunks(ANSWER, finish=True, usage=False),
            "gpt-4o-mini",
            Usage(),
            id="openai-before-usage",
        ),
    ],
)
def test_a_connection_cut_after_the_finish_ends_the_stream_with_its_answer(
    failure: Callable[[], Exception], name: str, chunks: list[bytes], model: str, usage: Usage
) -> None:
    """A complete, paid answer was thrown away as a `NetworkError` with no pass. Where no
    usage had come, the usage is unknown (no counts), not zero: as a call cut off."""
    request = ChatRequest(model).user("Ada")
    provider = cut_provider(name, chunks, failure())
    response = provider.chat_stream(request).response()
    assert response.text() == ANSWER and response.finish_reason == "stop"
    assert response.usage == usage

    async def achat() -> allama.ChatResponse:
        return await (await provider.achat_stream(request)).response()

    assert asyncio.run(achat()).usage == usage

    with allama.extract_stream(provider, Person, request) as stream:
        for _ in stream:
            pass
        extracted = stream.finish()
    assert extracted.value == Person(name="Ada", year=1843)
    assert (extracted.metadata.passes, extracted.metadata.usage) == (1, usage)
    if usage == Usage():
        assert extracted.metadata.cost is None and extracted.metadata.cost_missing == UNKNOWN

    async def aextract() -> Any:
        async with allama.aextract_stream(provider, Person, request) as stream:
            async for _ in stream:
                pass
            return await stream.finish()

    extracted = asyncio.run(aextract())
    assert extracted.value == Person(name="Ada", year=1843)
    assert (extracted.metadata.passes, extracted.metadata.usage) == (1, usage)
    # Through a wrapper too: its stream ends with the inner one's, with what it reported.
    wrapped = allama.RetryingProvider(provider)
    with allama.extract_stream(wrapped, Person, request) as stream:
        extracted = stream.finish()
    assert (extracted.metadata.passes, extracted.metadata.usage) == (1, usage)


def test_a_connection_cut_before_the_finish_is_still_a_network_failure() -> None:
    chunks = openai_chunks(ANSWER, finish=False, usage=False)
    provider = cut_provider("openai", chunks, httpx2.RemoteProtocolError("peer closed"))
    request = ChatRequest("gpt-4o-mini").user("Ada")
    with pytest.raises(NetworkError):
        provider.chat_stream(request).response()
    with (
        pytest.raises(NetworkError) as raised,
        allama.extract_stream(provider, Person, request) as s,
    ):
        s.finish()
    record = ExtractionMetadata.from_error(raised.value)
    assert record is not None and record.passes == 0 and record.usage == Usage()
    provider = cut_provider("openai", chunks, httpx2.ReadTimeout("timed out"))
    with pytest.raises(RequestTimeoutError):
        provider.chat_stream(request).response()


# Decisions.


def answering(*replies: dict[str, Any]) -> tuple[allama.HttpProvider, list[dict[str, Any]]]:
    """An OpenAI provider whose calls get `replies`, one per call, and what it was sent."""
    sent: list[dict[str, Any]] = []
    queue = list(replies)

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=queue.pop(0))

    transport = allama.Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("openai", api_key="sk-test", transport=transport), sent


def alternative(token: str, p: float) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(p), "bytes": list(token.encode())}


def completion(
    content: str | None,
    tokens: list[dict[str, Any]] | None = None,
    call: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call is not None:
        function = {"name": EXTRACTION_TOOL, "arguments": call}
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function}]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if call is not None else "stop",
                "logprobs": None if tokens is None else {"content": tokens, "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 2, "total_tokens": 52},
    }


PLAIN_YES = [
    {
        **alternative("Yes", 0.7),
        "top_logprobs": [alternative("Yes", 0.7), alternative("No", 0.2)],
    }
]

TOOL_MODELS = ["gpt-4", "gpt-3.5-turbo", "gpt-4-turbo", "chatgpt-4o-latest", "gpt-4o-2024-05-13"]


@pytest.mark.parametrize("model", TOOL_MODELS)
def test_probabilities_true_where_the_mode_falls_to_a_forced_tool_is_refused_before_sending(
    model: str,
) -> None:
    """These models answer through a forced tool, whose arguments have no probabilities;
    asked in plain text instead, they measured nothing either: OpenAI does not list the end
    of the output, so `Yes` (0.7) may have gone on (`Yes, but`), and every figure read 0
    with the enforcement given up for it. Refused before sending, saying so."""
    provider, sent = answering(completion("Yes", PLAIN_YES))
    request = ChatRequest(model).user("Sky blue?")
    with pytest.raises(UnsupportedError) as caught:
        allama.decide(provider, bool, request, probabilities=True)
    assert str(caught.value) == (
        "probabilities=True, but the answer would come as a tool call, whose arguments have "
        "no log-probabilities, and in plain text its tokens, which stop before the end of "
        "the answer, would measure no option"
    )
    assert sent == []
    # Without insisting, the tool holds the answer, and no probabilities are asked for.
    provider, sent = answering(completion(None, call='{"value":"Yes"}'))
    decision = allama.decide(provider, bool, request)
    assert decision.value is True and decision.metadata.mode is ExtractionMode.FORCED_TOOL
    assert decision.probabilities is None


def test_without_insisting_or_where_a_tool_is_held_to_the_forced_tool_stays() -> None:
    # The default keeps the tool, which holds the answer exactly.
    provider, sent = answering(completion(None, call='{"value":"No"}'))
    decision = allama.decide(provider, bool, ChatRequest("gpt-4").user("?"))
    assert decision.value is False and decision.metadata.mode is ExtractionMode.FORCED_TOOL
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    assert "tools" in sent[0] and "logprobs" not in sent[0]
    # A forced tool asked for, or a floor the prompt cannot meet: refused before sending.
    provider, sent = answering()
    forced = ChatRequest("gpt-4").user("?").with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(UnsupportedError):
        allama.decide(provider, bool, forced, probabilities=True)
    with pytest.raises(UnsupportedError):
        Extractor(min_enforcement="exact").decide(
            provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True
        )
    assert sent == []
    # A floor the prompt meets changes nothing: no plain-text answer measures an option.
    with pytest.raises(UnsupportedError):
        Extractor(min_enforcement="not_enforced").decide(
            provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True
        )
    assert sent == []


@pytest.mark.parametrize(
    ("model", "reply", "value"),
    [
        ("gpt-4o-mini", completion('{"value": "yes"}'), True),
        ("gpt-4o-mini", completion('{"value": "No."}'), False),
        ("gpt-4o-mini", completion('{"value": " **no** "}'), False),
        ("gpt-4", completion(None, call='{"value": "YES"}'), True),
    ],
)
def test_repair_matches_a_json_answer_written_loosely_and_says_so(
    model: str, reply: dict[str, Any], value: bool
) -> None:
    """ "Matched loosely under `repair`" held for plain answers only: `{"value": "yes"}`
    against `Yes`/`No` was a `ParseError` under `repair=True`."""
    provider, sent = answering(reply)
    request = ChatRequest(model).user("Sky blue?")
    decision = Extractor(repair=True).decide(provider, bool, request)
    assert decision.value is value and decision.metadata.repaired is True
    assert decision.metadata.passes == 1
    # The enum sent is the one sent without repair; without repair, still no value.
    plain, sent_plain = answering(reply)
    with pytest.raises(ParseError):
        Extractor().decide(plain, bool, request)
    shape = "tools" if model == "gpt-4" else "response_format"
    assert sent[0][shape] == sent_plain[0][shape]


def test_an_exact_json_answer_under_repair_is_no_repair_and_keeps_its_probabilities() -> None:
    tokens = [
        {**alternative(token, 1.0), "top_logprobs": [alternative(token, 1.0)]}
        for token in ('{"', "value", '":"')
    ]
    tokens.append(
        {
            **alternative("Yes", 0.7),
            "top_logprobs": [alternative("Yes", 0.7), alternative("No", 0.2)],
        }
    )
    tokens.append({**alternative('"}', 1.0), "top_logprobs": [alternative('"}', 1.0)]})
    provider, _ = answering(completion('{"value":"Yes"}', tokens))
    decision = Extractor(repair=True).decide(provider, bool, ChatRequest("gpt-4o-mini").user("?"))
    assert decision.value is True and decision.metadata.repaired is False
    assert decision.probabilities == pytest.approx({True: 0.7, False: 0.2})
    # A loose one has nothing to measure: it says why.
    loose = [dict(t) for t in tokens]
    loose[3] = {**alternative("yes", 0.7), "top_logprobs": [alternative("yes", 0.7)]}
    provider, _ = answering(completion('{"value":"yes"}', loose))
    decision = Extractor(repair=True).decide(provider, bool, ChatRequest("gpt-4o-mini").user("?"))
    assert decision.value is True and decision.metadata.repaired is True
    assert decision.probabilities is None
    assert decision.probabilities_missing == "the answer matched its option only after repair"
