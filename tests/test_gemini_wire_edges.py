"""Gemini wire edges: a stream chunk that does not fit the response shape keeps the usage it
reports (billed, as a body's is); Vertex AI resource model names are called where Vertex
serves them and answered from their model's capability row; the body option in Google's
snake_case spelling is merged with allama's fields, not sent beside them; a trailing
`data: [DONE]` does not lose a finished answer; a model's name that would cut the URL or
name another path is refused before sending, live and as a batch job's; a stream closed
between a chunk's text and its usage keeps the input count that came with it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata, ExtractionMode
from allama.adapters.gemini._stream import decode_stream
from allama.errors import (
    REPORTED_USAGE_KEY,
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    StreamDecodeError,
    paid_for,
)
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatResponse,
    FieldSubject,
    ReasoningEffort,
    RequestField,
    Usage,
)

MODEL = "gemini-2.5-flash"
BILLED = {"promptTokenCount": 1200, "candidatesTokenCount": 40, "totalTokenCount": 1240}
PAID = {"input_tokens": 1200, "output_tokens": 40}
FLAVOURS = ("sync", "async")


class Person(BaseModel):
    name: str


class Endpoint:
    """A scripted Gemini endpoint on `httpx2.MockTransport`: each request answered with
    `answer` (a JSON body, or SSE bytes), its URL and body recorded."""

    def __init__(self, answer: dict[str, Any] | bytes) -> None:
        self.answer = answer
        self.urls: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.urls.append(str(request.url))
        self.bodies.append(json.loads(request.read()))
        if isinstance(self.answer, bytes):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=self.answer, headers=headers)
        return httpx2.Response(200, json=self.answer)

    async def answer_async(self, request: httpx2.Request) -> httpx2.Response:
        return self(request)

    def provider(self, preset: str = "gemini", **options: Any) -> HttpProvider:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.answer_async)),
        )
        if "access_token" not in options:
            options.setdefault("api_key", "AIza-test-key-5150")
        made: HttpProvider = allama.provider(preset, transport=transport, **options)
        return made


def sse(*chunks: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks).encode()


def body(
    parts: list[Any], finish: str | None = "STOP", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    answer: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage is not None:
        answer["usageMetadata"] = usage
    return answer


def streamed(target: HttpProvider, request: ChatRequest, flavour: str) -> ChatResponse:
    """The collected response of a streamed call (raises the stream's error)."""
    if flavour == "sync":
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass
            return stream.response()

    async def run() -> ChatResponse:
        stream = await target.achat_stream(request)
        async for _ in stream:
            pass
        return await stream.response()

    return asyncio.run(run())


def called(target: HttpProvider, request: ChatRequest, flavour: str) -> ChatResponse:
    if flavour == "sync":
        return target.chat(request)
    return asyncio.run(target.achat(request))


def stream_error(target: HttpProvider, flavour: str) -> Error:
    with pytest.raises(Error) as caught:
        streamed(target, ChatRequest(MODEL).user("x"), flavour)
    return caught.value


# 1. A stream chunk that does not fit the response shape


NAMELESS_CALL = body([{"text": '{"name":"Ada"}'}, {"functionCall": {"args": {}}}], usage=BILLED)
"""One finishing chunk holding a function call without a name, and the whole call's usage."""
TEXT_FIRST = body([{"text": "Hello"}], finish=None, usage={"promptTokenCount": 1200})
NUMBER_TEXT = body([{"text": 7}], usage=BILLED)
"""The finishing chunk after `TEXT_FIRST`: a text part whose text is a number."""


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unreadable_chunk_keeps_the_usage_it_reports(flavour: str) -> None:
    for chunks in ((NAMELESS_CALL,), (TEXT_FIRST, NUMBER_TEXT)):
        error = stream_error(Endpoint(sse(*chunks)).provider(), flavour)
        assert isinstance(error, StreamDecodeError)
        assert "does not fit the response shape" in str(error)
        assert error.context.metadata[REPORTED_USAGE_KEY] == PAID
        assert paid_for(error) == [{"provider": "gemini", "model": MODEL, "usage": PAID}]
    # As the same answer's body keeps it.
    whole = Endpoint(body([{"text": "Hello"}, {"text": 7}], usage=BILLED)).provider()
    with pytest.raises(Error) as caught:
        called(whole, ChatRequest(MODEL).user("x"), flavour)
    assert caught.value.context.metadata[REPORTED_USAGE_KEY] == PAID


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unreadable_chunk_before_the_finish_keeps_its_input(flavour: str) -> None:
    # The output counts of a chunk before the finishing one are running: not the call's.
    running = body([{"text": 7}], finish=None, usage=BILLED)
    error = stream_error(Endpoint(sse(running)).provider(), flavour)
    assert isinstance(error, StreamDecodeError)
    assert error.context.metadata[REPORTED_USAGE_KEY] == {"input_tokens": 1200}


def test_the_decoder_puts_the_usage_on_its_error() -> None:
    with pytest.raises(StreamDecodeError) as caught:
        decode_stream(sse(NAMELESS_CALL), provider="gemini", model=MODEL)
    assert caught.value.context.metadata[REPORTED_USAGE_KEY] == PAID
    assert paid_for(caught.value)[0]["model"] == MODEL


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_extraction_stream_records_the_unreadable_chunks_usage(flavour: str) -> None:
    target = Endpoint(sse(NAMELESS_CALL)).provider()
    request = ChatRequest(MODEL).user("x")
    with pytest.raises(Error) as caught:
        if flavour == "sync":
            with allama.extract_stream(target, Person, request) as stream:
                for _ in stream:
                    pass
                stream.finish()
        else:

            async def run() -> None:
                async with allama.aextract_stream(target, Person, request) as astream:
                    async for _ in astream:
                        pass
                    await astream.finish()

            asyncio.run(run())
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert metadata.usage == Usage(input_tokens=1200, output_tokens=40)


# 2. Vertex AI resource model names

VERTEX = "https://us-central1-aiplatform.googleapis.com/v1/"
SCOPE = "projects/proj/locations/us-central1/"
ENDPOINT = "projects/proj/locations/us-central1/endpoints/1234567890"
VERTEX_URLS = {
    MODEL: f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    f"models/{MODEL}": f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    f"publishers/google/models/{MODEL}": f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    f"{SCOPE}publishers/google/models/{MODEL}": f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    f"google/{MODEL}": f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    "meta/llama-4-scout": f"{VERTEX}{SCOPE}publishers/meta/models/llama-4-scout",
    # Another project's model, named in full, is called there.
    f"projects/other/locations/europe-west4/publishers/google/models/{MODEL}": (
        f"{VERTEX}projects/other/locations/europe-west4/publishers/google/models/{MODEL}"
    ),
    ENDPOINT: f"{VERTEX}{ENDPOINT}",
}


def vertex(answer: dict[str, Any] | bytes, **options: Any) -> tuple[HttpProvider, Endpoint]:
    endpoint = Endpoint(answer)
    options = options or {"project": "proj", "location": "us-central1", "access_token": "ya29.t"}
    return endpoint.provider("vertex-gemini", **options), endpoint


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_vertex_resource_name_is_called_where_vertex_serves_it(flavour: str) -> None:
    for model, url in VERTEX_URLS.items():
        target, endpoint = vertex(body([{"text": "hi"}], usage=BILLED))
        called(target, ChatRequest(model).user("x"), flavour)
        target, streaming = vertex(sse(body([{"text": "hi"}], usage=BILLED)))
        streamed(target, ChatRequest(model).user("x"), flavour)
        assert endpoint.urls == [f"{url}:generateContent"], model
        assert streaming.urls == [f"{url}:streamGenerateContent?alt=sse"], model
    # Express mode (a key, no project): the global host's own root.
    target, endpoint = vertex(body([{"text": "hi"}]), api_key="AQ.express-key")
    for model in (f"publishers/google/models/{MODEL}", f"google/{MODEL}", MODEL):
        called(target, ChatRequest(model).user("x"), flavour)
    root = "https://aiplatform.googleapis.com/v1/"
    assert endpoint.urls == [f"{root}publishers/google/models/{MODEL}:generateContent"] * 3
    # The Gemini API's names are as they were.
    gemini = Endpoint(body([{"text": "hi"}]))
    for model in (MODEL, f"models/{MODEL}", "tunedModels/my-tuned-model"):
        called(gemini.provider(), ChatRequest(model).user("x"), flavour)
    api = "https://generativelanguage.googleapis.com/v1beta/"
    assert gemini.urls == [
        f"{api}models/{MODEL}:generateContent",
        f"{api}models/{MODEL}:generateContent",
        f"{api}tunedModels/my-tuned-model:generateContent",
    ]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_vertex_resource_name_is_answered_from_its_models_row(flavour: str) -> None:
    for model in (
        f"publishers/google/models/{MODEL}",
        f"{SCOPE}publishers/google/models/{MODEL}",
        f"google/{MODEL}",
    ):
        target, endpoint = vertex(body([{"text": "hi"}]))
        assert (
            target.chat_capability(model, ChatCapability.REASONING) is CapabilitySupport.SUPPORTED
        )
        request = ChatRequest(model).user("x").with_reasoning_effort(ReasoningEffort.LOW)
        answer = called(target, request, flavour)
        assert answer.warnings == ()
        assert endpoint.bodies[0]["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024}
    # A tuned model's endpoint names no model: unknown, as any id no row matches.
    target, endpoint = vertex(body([{"text": "hi"}]))
    answer = called(
        target, ChatRequest(ENDPOINT).user("x").with_reasoning_effort(ReasoningEffort.LOW), flavour
    )
    assert "generationConfig" not in endpoint.bodies[0]
    assert [w.subject for w in answer.warnings] == [
        FieldSubject(field=RequestField.REASONING_EFFORT)
    ]


# 3. The body option in Google's snake_case spelling

SCHEMA_WITH_SNAKE_NAMES = {
    "type": "object",
    "properties": {"first_name": {"type": "string"}, "birth_year": {"type": "integer"}},
    "required": ["first_name"],
}
NAME_TEXT = [{"text": '{"name":"Ada"}'}]
SUBMIT = [{"functionCall": {"name": "submit_structured_output", "args": {"name": "Ada"}}}]


def extracted(option: dict[str, Any], parts: list[Any], flavour: str, **more: Any) -> Any:
    endpoint = Endpoint(body(parts))
    request = ChatRequest(MODEL).user("x").with_option_json("gemini", option)
    for value in more.values():
        request = request.with_option(value)
    target = endpoint.provider()
    if flavour == "sync":
        outcome = allama.extract(target, Person, request)
    else:
        outcome = asyncio.run(allama.aextract(target, Person, request))
    return outcome.metadata, endpoint.bodies[0]


def recorded(metadata: ExtractionMetadata) -> tuple[Any, ...]:
    """What an extraction's record says of the request's enforcement."""
    return (
        metadata.enforcement.value,
        [(w.kind, w.subject, w.message) for w in metadata.degradations],
        [(w.kind, w.subject, w.message) for w in metadata.notes],
    )


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_snake_case_generation_config_replaces_allamas_output(flavour: str) -> None:
    camel = {"generationConfig": {"responseMimeType": "text/plain"}}
    control, control_sent = extracted(camel, NAME_TEXT, flavour)
    assert recorded(control)[0] == "not_enforced"
    assert control.degradations[0].subject == FieldSubject(field=RequestField.RESPONSE_FORMAT)
    for option in (
        {"generationConfig": {"response_mime_type": "text/plain"}},
        {"generation_config": {"response_mime_type": "text/plain"}},
    ):
        metadata, sent = extracted(option, NAME_TEXT, flavour)
        assert sent == control_sent
        assert sent["generationConfig"]["responseMimeType"] == "text/plain"
        assert recorded(metadata) == recorded(control)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_snake_case_tool_config_replaces_the_forced_call(flavour: str) -> None:
    forced = {"mode": ExtractionMode.FORCED_TOOL}
    camel = {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}
    control, control_sent = extracted(camel, SUBMIT, flavour, **forced)
    assert [w.subject for w in control.notes] == [FieldSubject(field=RequestField.TOOL_CHOICE)]
    option = {"tool_config": {"function_calling_config": {"mode": "NONE"}}}
    metadata, sent = extracted(option, SUBMIT, flavour, **forced)
    assert sent == control_sent
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert recorded(metadata) == recorded(control)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_snake_case_fields_merge_but_schema_property_names_stay(flavour: str) -> None:
    endpoint = Endpoint(body([{"text": "{}"}]))
    option: dict[str, Any] = {
        "generation_config": {
            "response_mime_type": "application/json",
            "response_json_schema": SCHEMA_WITH_SNAKE_NAMES,
            "thinking_config": {"include_thoughts": True},
        },
        "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "tool_config": {"retrieval_config": {"lat_lng": {"latitude": 1.5, "longitude": 2.5}}},
        "system_instruction": {"parts": [{"text": "Be brief."}]},
    }
    request = (
        ChatRequest(MODEL)
        .system("Be kind.")
        .user("x")
        .with_reasoning_effort(ReasoningEffort.LOW)
        .with_option_json("gemini", option)
    )
    called(endpoint.provider(), request, flavour)
    sent = endpoint.bodies[0]
    assert set(sent) == {
        "contents",
        "generationConfig",
        "safetySettings",
        "toolConfig",
        "systemInstruction",
    }
    assert sent["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA_WITH_SNAKE_NAMES,
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
    }
    assert sent["toolConfig"] == {
        "retrievalConfig": {"latLng": {"latitude": 1.5, "longitude": 2.5}}
    }
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["safetySettings"] == option["safety_settings"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_one_field_in_both_spellings_is_refused(flavour: str) -> None:
    both: tuple[tuple[dict[str, Any], str], ...] = (
        (
            {"generationConfig": {"temperature": 0.1}, "generation_config": {"top_k": 4}},
            "`generationConfig` and `generation_config`",
        ),
        (
            {"generationConfig": {"responseMimeType": "text/plain", "response_mime_type": "x"}},
            "`responseMimeType` and `response_mime_type` in `generationConfig`",
        ),
    )
    for option, names in both:
        endpoint = Endpoint(body([{"text": "hi"}]))
        request = ChatRequest(MODEL).user("x").with_option_json("gemini", option)
        with pytest.raises(InvalidRequestError) as caught:
            called(endpoint.provider(), request, flavour)
        assert names in str(caught.value)
        assert endpoint.urls == []


# 4. A trailing `data: [DONE]`

DONE = b"data: [DONE]\r\n\r\n"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_trailing_done_marker_keeps_the_finished_answer(flavour: str) -> None:
    finished = sse(body([{"text": "hello"}], usage=BILLED)) + DONE
    answer = streamed(Endpoint(finished).provider(), ChatRequest(MODEL).user("x"), flavour)
    assert (answer.text(), answer.finish_reason) == ("hello", "stop")
    assert answer.usage == Usage(input_tokens=1200, output_tokens=40)
    # Before any finish it ends nothing: the stream is left unfinished.
    unfinished = Endpoint(sse(body([{"text": "hel"}], finish=None)) + DONE).provider()
    with pytest.raises(IncompleteStreamError):
        streamed(unfinished, ChatRequest(MODEL).user("x"), flavour)


# 5. A model's name in the URL: its `/` kept, the rest quoted, what would cut it refused

API = "https://generativelanguage.googleapis.com/v1beta/"
GEMINI_NAMES = {
    MODEL: f"{API}models/{MODEL}",
    f"models/{MODEL}": f"{API}models/{MODEL}",
    "tunedModels/my-tune-1": f"{API}tunedModels/my-tune-1",
    "my model": f"{API}models/my%20model",
    "models/dé p": f"{API}models/d%C3%A9%20p",
    "models/a[b]": f"{API}models/a%5Bb%5D",
    "models/...x": f"{API}models/...x",
}
VERTEX_NAMES = {
    f"publishers/google/models/{MODEL}": f"{VERTEX}{SCOPE}publishers/google/models/{MODEL}",
    ENDPOINT: f"{VERTEX}{ENDPOINT}",
    "google/my model": f"{VERTEX}{SCOPE}publishers/google/models/my%20model",
    "my model": f"{VERTEX}{SCOPE}publishers/google/models/my%20model",
}
UNNAMABLE = [
    ("g#1", "it holds '#', which a model's name in the URL cannot carry"),
    ("g?x=1", "it holds '?', which a model's name in the URL cannot carry"),
    ("models/g%2F1", "it holds '%', which a model's name in the URL cannot carry"),
    ("models/g\n1", "it holds '\\n', which a model's name in the URL cannot carry"),
    ("g\x7f", "it holds '\\x7f', which a model's name in the URL cannot carry"),
    ("models/../../v1/x", "its part `..` is a step to this folder or its parent, not a name"),
    (
        f"publishers/google/models/./{MODEL}",
        "its part `.` is a step to this folder or its parent, not a name",
    ),
    ("..", "its part `..` is a step to this folder or its parent, not a name"),
]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_models_name_is_quoted_with_its_slashes_kept(flavour: str) -> None:
    for preset, names in (("gemini", GEMINI_NAMES), ("vertex-gemini", VERTEX_NAMES)):
        for model, url in names.items():
            if preset == "gemini":
                endpoint = Endpoint(body([{"text": "hi"}]))
                streaming = Endpoint(sse(body([{"text": "hi"}])))
                target, stream_target = endpoint.provider(), streaming.provider()
            else:
                target, endpoint = vertex(body([{"text": "hi"}]))
                stream_target, streaming = vertex(sse(body([{"text": "hi"}])))
            called(target, ChatRequest(model).user("x"), flavour)
            streamed(stream_target, ChatRequest(model).user("x"), flavour)
            assert endpoint.urls == [f"{url}:generateContent"], model
            assert streaming.urls == [f"{url}:streamGenerateContent?alt=sse"], model


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("preset", ["gemini", "vertex-gemini"])
@pytest.mark.parametrize(("model", "wrong"), UNNAMABLE)
def test_a_models_name_that_would_cut_the_url_is_refused_before_sending(
    model: str, wrong: str, preset: str, flavour: str
) -> None:
    if preset == "gemini":
        endpoint = Endpoint(body([{"text": "hi"}]))
        target = endpoint.provider()
    else:
        target, endpoint = vertex(body([{"text": "hi"}]))
    request = ChatRequest(model).user("x")
    for call in (called, streamed):
        with pytest.raises(InvalidRequestError) as caught:
            call(target, request, flavour)
        error = caught.value
        assert type(error) is InvalidRequestError
        assert str(error) == (
            f"the model {model!r} cannot be named in the URL: {wrong} (a model's name has "
            "letters, digits, `-`, `_` and `.`, and `/` between its parts)"
        )
        assert (error.provider, error.model, error.status) == (preset, model, None)
    # A dry run refuses it as the call does.
    with pytest.raises(InvalidRequestError):
        target.validate_chat_request(request)
    assert endpoint.urls == []


@pytest.mark.parametrize(
    ("model", "path"),
    [
        (MODEL, f"models/{MODEL}"),
        (f"models/{MODEL}", f"models/{MODEL}"),
        ("tunedModels/my-tune-1", "tunedModels/my-tune-1"),
        ("my model", "models/my%20model"),
    ],
)
def test_a_gemini_batch_job_names_its_model_as_a_live_call_does(model: str, path: str) -> None:
    from allama.adapters._jobs._gemini import DIALECT
    from allama.providers._jobs import provider_jobs

    jobs = provider_jobs(allama.provider("gemini", api_key="k"))
    entries = [jobs.entry("key0", ChatRequest(model).user("doc"))[0]]
    create = next(DIALECT.submit(jobs.target(model), entries, "allama-x"))
    assert create.url == f"{API}{path}:batchGenerateContent"


@pytest.mark.parametrize(("model", "wrong"), UNNAMABLE)
def test_a_gemini_batch_job_refuses_a_name_that_would_cut_the_url(model: str, wrong: str) -> None:
    from allama.adapters._jobs._gemini import DIALECT
    from allama.providers._jobs import provider_jobs

    jobs = provider_jobs(allama.provider("gemini", api_key="k"))
    said = (
        f"the model {model!r} cannot be named in the URL: {wrong} (a model's name has "
        "letters, digits, `-`, `_` and `.`, and `/` between its parts)"
    )
    # Its requests are refused as its live calls are, when encoded as the job's entries ...
    with pytest.raises(InvalidRequestError) as caught:
        jobs.entry("key0", ChatRequest(model).user("doc"))
    assert (str(caught.value), caught.value.provider) == (said, "gemini")
    # ... and a job to it is never asked for, nothing uploaded.
    entries = [jobs.entry("key0", ChatRequest(MODEL).user("doc"))[0]]
    steps = DIALECT.submit(jobs.target(model), entries, "allama-x")
    with pytest.raises(InvalidRequestError) as caught:
        next(steps)
    assert (str(caught.value), caught.value.model) == (said, model)


# 6. A stream closed between a chunk's text and its usage

RUNNING = {"promptTokenCount": 1200, "totalTokenCount": 1200}
HALF = body([{"text": '{"name": '}], finish=None, usage=RUNNING)
REST = body([{"text": '"Ada"}'}], usage=BILLED)
NO_OUTPUT = "the provider did not report the output tokens"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_extraction_stream_closed_after_a_chunks_text_keeps_its_input_count(
    flavour: str,
) -> None:
    target = Endpoint(sse(HALF, REST)).provider()
    request = ChatRequest(MODEL).user("x")
    with pytest.raises(Error) as caught:
        if flavour == "sync":
            stream = allama.extract_stream(target, Person, request)
            for event in stream:
                if event.type == "text_delta":
                    break
            stream.close()
            stream.finish()
        else:

            async def run() -> None:
                astream = await allama.aextract_stream(target, Person, request)
                async for event in astream:
                    if event.type == "text_delta":
                        break
                await astream.aclose()
                await astream.finish()

            asyncio.run(run())
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert (metadata.passes, metadata.usage, metadata.cost_missing) == (
        0,
        Usage(input_tokens=1200),
        NO_OUTPUT,
    )
