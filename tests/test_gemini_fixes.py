"""Gemini fixes: a stream cut before its finishing chunk reports its input and an unknown
output (the running counts of the chunks before are not the call's); the caller's
`thinkingConfig` is merged into the one `reasoning_effort` gave; an image Gemini does not
read is refused before sending when given by URL, as it is inline; a schema with "too many
states for serving" is refused on the field the request carried its schemas in."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata, ExtractionMode
from allama.adapters.gemini._stream import decode_stream
from allama.errors import (
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    UnsupportedError,
    paid_for,
)
from allama.providers import HttpProvider
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    DocumentPart,
    ImagePart,
    ProviderDataEvent,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    ToolDefinition,
    UnsupportedStage,
    Usage,
    UsageEvent,
)

KEY = "AIza-test-key-1234"
MODEL = "gemini-2.0-flash"
SSE = {"content-type": "text/event-stream"}
NO_OUTPUT = "the provider did not report the output tokens"


class Person(BaseModel):
    name: str


def chunk(text: str, usage: dict[str, Any] | None = None, finish: str | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage is not None:
        body["usageMetadata"] = usage
    return f"data: {json.dumps(body)}\r\n\r\n"


RUNNING = {"promptTokenCount": 15, "totalTokenCount": 15}
"""What Gemini sends on the chunks before the last: the prompt, no output count yet."""
THINKING = {"promptTokenCount": 30, "thoughtsTokenCount": 755, "totalTokenCount": 785}
WRITING = {**THINKING, "candidatesTokenCount": 5, "totalTokenCount": 790}
FINAL = {"promptTokenCount": 15, "candidatesTokenCount": 9, "totalTokenCount": 24}
OVERLOADED = '{\n  "error": {\n    "code": 503,\n    "message": "The model is overloaded.",\n'
OVERLOADED += '    "status": "UNAVAILABLE"\n  }\n}\n'


def collected(data: str) -> StreamCollector:
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider="gemini"):
        collector.push(event)
    return collector


def served(body: str) -> HttpProvider:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body.encode(), headers=SSE)

    async def answer_async(request: httpx2.Request) -> httpx2.Response:
        return answer(request)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer_async)),
    )
    target: HttpProvider = allama.provider("gemini", api_key=KEY, transport=transport)
    return target


# 1. A stream cut before its finishing chunk


def test_running_counts_before_the_finish_are_not_the_calls_output() -> None:
    events = decode_stream((chunk('{"name": "A', RUNNING) + chunk("da", RUNNING)).encode())
    usages = [event.usage for event in events if isinstance(event, UsageEvent)]
    assert usages == [Usage(input_tokens=15), Usage(input_tokens=15)]
    # Cut there: the input was read, the output was written in part, its size unknown.
    assert collected(chunk("a", RUNNING)).partial_response().usage == Usage(input_tokens=15)


def test_a_running_thoughts_count_is_not_reported_as_the_calls() -> None:
    partial = collected(chunk("thinking", THINKING) + chunk('{"name": "A', WRITING))
    assert partial.partial_response().usage == Usage(input_tokens=30)


def test_the_finishing_chunk_and_those_after_it_keep_the_whole_count() -> None:
    finished = collected(chunk("a", RUNNING) + chunk("b", FINAL, finish="STOP")).finish()
    assert finished.usage == Usage(input_tokens=15, output_tokens=9)
    # An empty answer: the finishing chunk's omitted output count is 0, as in a body.
    empty = collected(chunk("", RUNNING) + chunk("", RUNNING, finish="STOP")).finish()
    assert empty.usage == Usage(input_tokens=15, output_tokens=0)
    # The usage on a chunk of its own after the finishing one is the call's too.
    after = "data: " + json.dumps({"usageMetadata": FINAL}) + "\r\n\r\n"
    late = collected(chunk("a", RUNNING) + chunk("b", finish="STOP") + after).finish()
    assert late.usage == Usage(input_tokens=15, output_tokens=9)
    # A prompt blocked in the first chunk answered nothing, and that is final.
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": RUNNING}
    answer = collected("data: " + json.dumps(blocked) + "\r\n\r\n").finish()
    assert answer.usage == Usage(input_tokens=15, output_tokens=0)


def test_output_audio_tokens_are_reported_only_once_final() -> None:
    details = {
        "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 10}],
        "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 4}],
    }
    running = {"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14}
    events = decode_stream(chunk("a", {**running, **details}).encode())
    audio = [
        e.value for e in events if isinstance(e, ProviderDataEvent) and e.key == "audio_tokens"
    ]
    assert audio == [{"input_audio_tokens": 10}]
    final = {**running, **details, "candidatesTokenCount": 6, "totalTokenCount": 16}
    data = chunk("a", {**running, **details}) + chunk("b", final, finish="STOP")
    answer = collected(data).finish()
    assert answer.provider_data["gemini"]["audio_tokens"] == {
        "input_audio_tokens": 10,
        "output_audio_tokens": 4,
    }
    assert answer.usage == Usage(input_tokens=10, output_tokens=6)


def _reported(error: BaseException) -> dict[str, Any]:
    assert isinstance(error, Error)
    [paid] = paid_for(error)
    usage = paid["usage"]
    assert isinstance(usage, dict)
    return usage


def test_a_chat_stream_cut_reports_no_output_it_cannot_know() -> None:
    target = served(chunk("Par", RUNNING) + chunk("is is the capital", RUNNING))
    with (
        pytest.raises(IncompleteStreamError) as caught,
        target.chat_stream(ChatRequest(MODEL).user("x")) as stream,
    ):
        for _ in stream:
            pass
        stream.response()
    assert _reported(caught.value) == {"input_tokens": 15}

    async def run() -> None:
        stream = await target.achat_stream(ChatRequest(MODEL).user("x"))
        async for _ in stream:
            pass
        await stream.response()

    with pytest.raises(IncompleteStreamError) as caught_async:
        asyncio.run(run())
    assert _reported(caught_async.value) == {"input_tokens": 15}


def test_an_extraction_stream_that_fails_midway_has_an_unknown_cost() -> None:
    body = chunk('{"name": "Ada', RUNNING) + chunk(" Lovelace", RUNNING) + OVERLOADED
    target = served(body)
    request = ChatRequest(MODEL).user("x")
    with (
        pytest.raises(allama.Error) as caught,
        allama.extract_stream(target, Person, request) as stream,
    ):
        for _ in stream:
            pass
        stream.finish()
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert metadata.usage == Usage(input_tokens=15)
    assert (metadata.cost, metadata.cost_missing) == (None, NO_OUTPUT)

    async def run() -> None:
        async with allama.aextract_stream(target, Person, request) as astream:
            async for _ in astream:
                pass
            await astream.finish()

    with pytest.raises(allama.Error) as caught_async:
        asyncio.run(run())
    metadata = ExtractionMetadata.from_error(caught_async.value)
    assert metadata is not None and metadata.usage == Usage(input_tokens=15)
    assert (metadata.cost, metadata.cost_missing) == (None, NO_OUTPUT)
    # The same stream, finished, is priced.
    whole = served(chunk('{"name": "Ada', RUNNING) + chunk('"}', FINAL, finish="STOP"))
    with allama.extract_stream(whole, Person, request) as stream:
        for _ in stream:
            pass
        priced = stream.finish().metadata
    assert priced.usage == Usage(input_tokens=15, output_tokens=9) and priced.cost is not None


class _Stalled(httpx2.AsyncByteStream):
    """One chunk with running counts, then nothing: the caller gives up waiting."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield chunk(
            '{"name": "A', {**RUNNING, "candidatesTokenCount": 5, "totalTokenCount": 20}
        ).encode()
        await asyncio.sleep(30)
        yield chunk('da"}', FINAL, finish="STOP").encode()


def test_a_cancelled_extraction_stream_has_an_unknown_cost() -> None:
    async def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=_Stalled(), headers=SSE)

    transport = Transport(async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    target = allama.provider("gemini", api_key=KEY, transport=transport)

    async def run() -> None:
        async with asyncio.timeout(0.3):
            async with allama.aextract_stream(target, Person, ChatRequest(MODEL).user("x")) as st:
                async for _ in st:
                    pass
                await st.finish()

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(run())
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None and metadata.usage == Usage(input_tokens=15)
    assert (metadata.cost, metadata.cost_missing) == (None, NO_OUTPUT)


# 2. The caller's thinkingConfig


def _generation(request: ChatRequest) -> dict[str, Any]:
    target: HttpProvider = allama.provider("gemini", api_key=KEY)
    http, _ = target._prepare(request, stream=False)
    config = http.body["generationConfig"]
    assert isinstance(config, dict)
    return config


def _with(request: ChatRequest, config: dict[str, Any]) -> ChatRequest:
    return request.with_option_json("gemini", {"generationConfig": config})


def test_the_callers_thinking_config_is_merged_into_the_effort() -> None:
    thoughts = {"thinkingConfig": {"includeThoughts": True}, "topK": 40}
    budget = ChatRequest("gemini-2.5-flash").user("x").with_reasoning_effort(ReasoningEffort.LOW)
    assert _generation(_with(budget, thoughts)) == {
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        "topK": 40,
    }
    level = (
        ChatRequest("gemini-3-flash-preview").user("x").with_reasoning_effort(ReasoningEffort.LOW)
    )
    assert _generation(_with(level, thoughts))["thinkingConfig"] == {
        "thinkingLevel": "LOW",
        "includeThoughts": True,
    }
    # The caller's keys win; a budget or a level of its own replaces the one derived.
    own = {"thinkingConfig": {"thinkingBudget": 99, "includeThoughts": True}}
    assert _generation(_with(budget, own))["thinkingConfig"] == own["thinkingConfig"]
    other = {"thinkingConfig": {"thinkingLevel": "HIGH"}}
    assert _generation(_with(budget, other))["thinkingConfig"] == {"thinkingLevel": "HIGH"}
    # A thinkingConfig that is not an object replaces allama's, as any other key does.
    assert _generation(_with(budget, {"thinkingConfig": None})) == {"thinkingConfig": None}
    # Without reasoning_effort, the caller's is sent as it is.
    plain = _with(ChatRequest("gemini-2.5-flash").user("x"), thoughts)
    assert _generation(plain) == thoughts


# 3. Images Gemini does not read, given by URL


@pytest.mark.parametrize(
    "part",
    [
        ImagePart(url="https://example.com/chart.gif"),
        ImagePart(url="gs://bucket/chart.GIF"),
        ImagePart(url="https://example.com/picture", media_type="image/bmp"),
        ImagePart(url="https://example.com/chart.png", media_type="image/gif"),
    ],
)
def test_an_unread_image_by_url_is_refused_before_sending(part: ImagePart) -> None:
    sent: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    for name, options in (
        ("gemini", {"api_key": KEY}),
        ("vertex-gemini", {"access_token": "t", "project": "p", "location": "us-central1"}),
    ):
        target = allama.provider(name, transport=transport, **options)
        request = ChatRequest("gemini-2.5-flash").user("describe", part)
        with pytest.raises(InvalidRequestError, match="PNG, JPEG, WebP, HEIC and HEIF"):
            target.chat(request)
    assert sent == []


def test_images_gemini_reads_and_other_files_by_url_are_still_sent() -> None:
    target: HttpProvider = allama.provider("gemini", api_key=KEY)
    request = ChatRequest("gemini-2.5-flash").user(
        "describe",
        ImagePart(url="https://example.com/cat.jpg"),
        ImagePart(url="https://example.com/render?id=7"),  # no type said: the server's word
        ImagePart(url="https://example.com/photo", media_type="image/webp"),
        DocumentPart(url="gs://bucket/report.pdf"),
    )
    http, _ = target._prepare(request, stream=False)
    assert http.body["contents"][0]["parts"][1:] == [
        {"fileData": {"fileUri": "https://example.com/cat.jpg", "mimeType": "image/jpeg"}},
        {"fileData": {"fileUri": "https://example.com/render?id=7"}},
        {"fileData": {"fileUri": "https://example.com/photo", "mimeType": "image/webp"}},
        {"fileData": {"fileUri": "gs://bucket/report.pdf", "mimeType": "application/pdf"}},
    ]


def test_tools_of_one_name_are_refused_unsent() -> None:
    """Gemini answers "Duplicate function declaration found"; which tool a call named
    could not be told."""
    sent: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    tools = [
        ToolDefinition(name="lookup", parameters={"type": "object"}),
        ToolDefinition(name="save", parameters={"type": "object"}),
        ToolDefinition(name="lookup", description="again", parameters={"type": "object"}),
    ]
    for name, options, display in (
        ("gemini", {"api_key": KEY}, "Gemini"),
        (
            "vertex-gemini",
            {"access_token": "t", "project": "p", "location": "us-central1"},
            "Gemini on Vertex AI",
        ),
    ):
        target = allama.provider(name, transport=transport, **options)
        request = ChatRequest("gemini-2.5-flash").user("hi").with_tools(tools)
        with pytest.raises(InvalidRequestError) as raised:
            target.chat(request)
        assert str(raised.value) == (
            f"{display} takes each tool name once, and the request's tools repeat names "
            "(positions count from 0): `lookup` names the tools at positions 0 and 2"
        )
    assert sent == []


# A schema too complex to serve, put on the field the request carried its schemas in

TOO_MANY_STATES = (
    "The specified schema produces a constraint that has too many states for serving.  "
    "Typical causes of this error are schemas with lots of text (for example, very long "
    "property or enum names), schemas with long array length limits (especially when "
    "nested), or schemas using complex value matchers (for example, integers or numbers with "
    "minimum/maximum bounds or strings with complex formats like date-time)"
)
SMALL = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def _too_many_states() -> tuple[HttpProvider, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        error = {"code": 400, "message": TOO_MANY_STATES, "status": "INVALID_ARGUMENT"}
        return httpx2.Response(400, json={"error": error})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    target = allama.provider("gemini", api_key=KEY, transport=transport)
    assert isinstance(target, HttpProvider)
    return target, bodies


@pytest.mark.parametrize(
    ("model", "schema", "tools", "field"),
    [
        ("gemini-2.5-flash", False, True, RequestField.TOOLS),
        ("gemini-2.5-flash", True, False, RequestField.RESPONSE_FORMAT),
        # Gemini 3 takes both: together they are the constraint, neither alone.
        ("gemini-3-flash-preview", True, True, None),
    ],
    ids=["tools", "response-schema", "both"],
)
def test_too_many_states_is_put_on_the_field_that_was_sent(
    model: str, schema: bool, tools: bool, field: RequestField | None
) -> None:
    target, bodies = _too_many_states()
    request = ChatRequest(model).user("x")
    if schema:
        request = request.with_response_format(ResponseFormat.for_schema(SMALL, name="r"))
    if tools:
        request = request.with_tools([ToolDefinition(name="lookup", parameters=SMALL)])
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert (raised.value.field, raised.value.stage) == (field, UnsupportedStage.PROVIDER)
    assert str(raised.value) == TOO_MANY_STATES
    assert ("tools" in bodies[0], "generationConfig" in bodies[0]) == (tools, schema)


def test_a_forced_tool_extraction_too_many_states_is_on_its_tools() -> None:
    """The forced tool carries the schema: the refusal is of `tools`, not of a response
    format that was never sent."""
    target, bodies = _too_many_states()
    request = ChatRequest("gemini-2.5-flash").user("x").with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(UnsupportedError) as raised:
        allama.extract(target, Person, request)
    assert raised.value.field is RequestField.TOOLS
    assert "generationConfig" not in bodies[0] and bodies[0]["toolConfig"]
