"""`local` says what the running engine cannot do, instead of sending it to be lost or to
fail: images for a model without vision, tools for a chat template without tool calls, a
named tool the request does not give; a generation that filled its slot's context is not
a token limit reached; engine failures are allama errors; engine options of 0 are refused;
a call in flight when `local` is closed fails as closed, not to be retried, and starts no
engine after the close.

The engine is faked: a `LocalEngine` marked running with the properties llama.cpp's
`/props` answered (`xllamacpp` 2026.10.11549, SmolLM2), its HTTP calls answered by a mock
transport with the bodies that server sent; but for the closes (marked `local`), which run
the real engine on a tiny model.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import re
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, Field

import allama
from allama import (
    ChatRequest,
    ExtractionMode,
    Extractor,
    RetryingProvider,
    SchemaEnforcement,
    ToolChoice,
    ToolDefinition,
)
from allama.cli import main
from allama.errors import (
    Error,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    UnsupportedError,
)
from allama.extract import EXTRACTION_TOOL, ExtractionMetadata
from allama.local import (
    EngineNotInstalledError,
    EngineStartError,
    LlamaCppProvider,
    LocalEngine,
    ModelNotFoundError,
)
from allama.local import _provider as _provider_module
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    Finish,
    FinishReason,
    ImagePart,
    RequestField,
    UnsupportedPolicy,
    UnsupportedStage,
    UsageEvent,
    ValidationCoverage,
    WarningKind,
)

ADDRESS = "http://127.0.0.1:9"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
# SmolLM2's template, as the server reports it: no tools, no vision.
NO_TOOLS = {"supports_tool_calls": False, "supports_parallel_tool_calls": False}
WITH_TOOLS = {"supports_tool_calls": True, "supports_parallel_tool_calls": True}
NO_VISION_BODY = (
    b'{"error":{"code":500,"message":"image input is not supported - hint: if this is '
    b'unexpected, you may need to provide the mmproj","type":"server_error"}}'
)
TOOL = ToolDefinition(
    name="get_time",
    description="time",
    parameters={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)


class City(BaseModel):
    city: str


class _Server:
    """The fake server's answers, and the bodies it was sent."""

    def __init__(self, answer: Any = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.answer = answer or _answer("ok")

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        answer = self.answer
        return answer(request) if callable(answer) else answer


def _answer(
    content: str, finish: str = "stop", prompt: int = 10, completion: int = 2
) -> httpx2.Response:
    message = {"role": "assistant", "content": content}
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    choice = {"index": 0, "finish_reason": finish, "message": message}
    return httpx2.Response(200, json={"id": "c", "model": "m", "choices": [choice], "usage": usage})


def _transport(server: _Server) -> Transport:
    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(server)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server)),
    )


def _engine(
    *,
    caps: dict[str, bool] | None = None,
    vision: bool = False,
    slot: int | None = 4096,
    context: int = 4096,
    parallel: int = 1,
) -> LocalEngine:
    """An engine taken for running, with the properties its server would report."""
    engine = LocalEngine("model.gguf", context=context, parallel=parallel)
    engine._server = object()
    engine._address = ADDRESS
    engine.properties = {
        "chat_template_caps": NO_TOOLS if caps is None else caps,
        "modalities": {"vision": vision, "video": False, "audio": False},
    }
    if slot is not None:
        engine.properties["default_generation_settings"] = {"n_ctx": slot}
    return engine


def _local(server: _Server, engine: LocalEngine | None = None) -> LlamaCppProvider:
    provider = allama.provider("local", engine=engine or _engine(), transport=_transport(server))
    assert isinstance(provider, LlamaCppProvider)
    return provider


def _image_request() -> ChatRequest:
    return ChatRequest("m").user("Describe.", ImagePart(data=PNG, media_type="image/png"))


# 1. Images


def test_an_image_for_a_model_without_vision_is_left_out_with_a_warning() -> None:
    server = _Server()
    local = _local(server)
    assert local.chat_capability("m", ChatCapability.IMAGE_INPUT) is CapabilitySupport.UNSUPPORTED
    response = local.chat(_image_request())
    assert server.sent[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Describe."}]}
    ]
    assert [(w.kind, w.message) for w in response.warnings] == [
        (
            WarningKind.UNSUPPORTED,
            "`m` on the local llama.cpp engine takes no images; the image was left out",
        )
    ]
    assert response.warnings[0].is_about(RequestField.IMAGES)


def test_an_image_for_a_model_without_vision_is_refused_under_the_error_policy() -> None:
    server = _Server()
    local = _local(server)
    request = _image_request().with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as refused:
        local.validate_chat_request(request)
    assert refused.value.field is RequestField.IMAGES
    with pytest.raises(UnsupportedError) as raised:
        local.chat(request)
    assert raised.value.stage is UnsupportedStage.BEFORE_SENDING
    assert str(raised.value) == (
        "cannot send `images`: `m` on the local llama.cpp engine takes no images"
    )
    assert server.sent == []


def test_an_image_for_a_model_with_vision_is_sent() -> None:
    server = _Server()
    local = _local(server, _engine(vision=True))
    response = local.chat(_image_request())
    content = server.sent[0]["messages"][0]["content"]
    assert [part["type"] for part in content] == ["text", "image_url"]
    assert response.warnings == ()


def test_the_servers_500_for_an_image_is_a_refusal_that_is_not_retried() -> None:
    server = _Server(httpx2.Response(500, content=NO_VISION_BODY))
    transport = _transport(server)
    provider = allama.provider("llama-cpp", base_url="http://llama.test/v1", transport=transport)
    sleeps: list[float] = []
    with pytest.raises(UnsupportedError) as refused:
        RetryingProvider(provider, sleep=sleeps.append).chat(_image_request())
    error = refused.value
    assert (error.field, error.stage, error.status, error.retryable) == (
        RequestField.IMAGES,
        UnsupportedStage.PROVIDER,
        500,
        False,
    )
    assert error.message.startswith("image input is not supported")
    assert len(server.sent) == 1 and sleeps == []
    with pytest.raises(UnsupportedError) as streamed:
        provider.chat_stream(_image_request())
    assert streamed.value.field is RequestField.IMAGES
    assert not isinstance(streamed.value, ServerError)


# 2. Tools on a template without tool calls


def test_tools_for_a_template_without_tool_calls_are_left_out_with_warnings() -> None:
    server = _Server()
    local = _local(server)
    request = ChatRequest("m").user("Time in Paris?").with_tools([TOOL])
    response = local.chat(request.with_tool_choice(ToolChoice.tool("get_time")))
    sent = server.sent[0]
    assert "tools" not in sent and "tool_choice" not in sent
    where = "the model's chat template on the local llama.cpp engine has no tool calls"
    assert [(w.kind, w.message) for w in response.warnings] == [
        (WarningKind.UNSUPPORTED, f"{where}; the tools were left out"),
        (WarningKind.UNSUPPORTED, f"{where}, so no call can be forced; `tool_choice` was left out"),
    ]
    assert response.warnings[0].is_about(RequestField.TOOLS)
    assert response.warnings[1].is_about(RequestField.TOOL_CHOICE)
    # Offered, not forced: one warning, for the tools.
    offered = local.chat(request)
    assert [w.message for w in offered.warnings] == [f"{where}; the tools were left out"]


def test_tools_for_a_template_without_tool_calls_are_refused_under_the_error_policy() -> None:
    server = _Server()
    local = _local(server)
    request = (
        ChatRequest("m")
        .user("Time in Paris?")
        .with_tools([TOOL])
        .with_tool_choice(ToolChoice.required())
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as refused:
        asyncio.run(local.achat(request))
    assert refused.value.field is RequestField.TOOLS
    assert refused.value.stage is UnsupportedStage.BEFORE_SENDING
    assert server.sent == []


def test_tools_for_a_template_with_tool_calls_are_sent() -> None:
    server = _Server()
    local = _local(server, _engine(caps=WITH_TOOLS))
    request = ChatRequest("m").user("Time in Paris?").with_tools([TOOL])
    response = local.chat(request.with_tool_choice(ToolChoice.tool("get_time")))
    assert [tool["function"]["name"] for tool in server.sent[0]["tools"]] == ["get_time"]
    assert server.sent[0]["tool_choice"] == "required"
    assert response.warnings == ()


REFUSED = (
    "cannot send `tools`: the model's chat template on the local llama.cpp engine has no tool "
    "calls, so extraction mode `forced_tool` cannot be answered (its tool would be left out); "
    "use extraction mode `native` (ExtractionMode.NATIVE) instead"
)
NOT_KNOWN = (
    "the local llama.cpp engine has not loaded the model yet, so whether its chat template "
    "has tool calls is not known (start() first for the answer); a template without them "
    "takes no tools"
)


def _extract_stream(local: LlamaCppProvider, request: ChatRequest) -> Any:
    with allama.extract_stream(local, City, request) as stream:
        for _ in stream:
            pass
        return stream.finish()


async def _aextract_stream(local: LlamaCppProvider, request: ChatRequest) -> Any:
    async with await allama.aextract_stream(local, City, request) as stream:
        async for _ in stream:
            pass
        return await stream.finish()


_FORCED_TOOL_WAYS = {
    "plan": lambda local, request: Extractor().plan(local, City, request),
    "streamed plan": lambda local, request: Extractor().plan(local, City, request, stream=True),
    "extract": lambda local, request: Extractor(retries=2).extract(local, City, request),
    "aextract": lambda local, request: asyncio.run(
        Extractor(retries=2).aextract(local, City, request)
    ),
    "extract_stream": _extract_stream,
    "aextract_stream": lambda local, request: asyncio.run(_aextract_stream(local, request)),
    "decide": lambda local, request: allama.decide(local, bool, request),
    "batch": lambda local, request: allama.batch(local, City, ["Paris"], request=request),
}


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
@pytest.mark.parametrize("way", list(_FORCED_TOOL_WAYS))
def test_a_forced_tool_extraction_on_a_template_without_tools_is_refused_before_sending(
    way: str, policy: UnsupportedPolicy
) -> None:
    """Left out, the extraction's tool could never be called: each pass (and retry) would be
    paid for a `MissingToolCallError`. Refused before sending, whatever the policy, and the
    same way by a plan, a call, a stream, a decision and a batch."""
    server = _Server()
    local = _local(server)
    request = ChatRequest("m").user("City: Paris").with_unsupported_policy(policy)
    forced = request.with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(UnsupportedError) as refused:
        _FORCED_TOOL_WAYS[way](local, forced)
    error = refused.value
    assert str(error) == REFUSED
    assert (error.field, error.stage, error.retryable) == (
        RequestField.TOOLS,
        UnsupportedStage.BEFORE_SENDING,
        False,
    )
    if way not in ("plan", "streamed plan", "batch"):
        record = ExtractionMetadata.from_error(error)
        assert record is not None
        assert (record.mode, record.passes) == (ExtractionMode.FORCED_TOOL, 0)
    assert server.sent == []


def test_auto_mode_and_native_mode_extract_on_a_template_without_tools() -> None:
    server = _Server(_answer('{"city": "Paris"}'))
    local = _local(server)
    request = ChatRequest("m").user("City: Paris")
    auto = Extractor().plan(local, City, request)
    assert (auto.mode, auto.enforcement) == (ExtractionMode.NATIVE, SchemaEnforcement.EXACT)
    native = allama.extract(local, City, request.with_option(ExtractionMode.NATIVE))
    assert native.value == City(city="Paris")
    assert "tools" not in server.sent[0]


def test_a_users_own_forced_tool_on_a_template_without_tools_is_still_left_out() -> None:
    """Only the extraction's own tool is refused: a chat call forcing the caller's tool is
    sent without it, as before, with the warnings (test above)."""
    server = _Server()
    local = _local(server)
    request = ChatRequest("m").user("Time in Paris?").with_tools([TOOL])
    response = local.chat(request.with_tool_choice(ToolChoice.tool("get_time")))
    assert len(server.sent) == 1 and "tools" not in server.sent[0]
    assert [w.is_about(RequestField.TOOLS) for w in response.warnings] == [True, False]


def test_the_extraction_tool_the_provider_knows_is_extractions_own() -> None:
    assert _provider_module._EXTRACTION_TOOL == EXTRACTION_TOOL


@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_tool_planned_before_the_engine_runs_is_not_claimed_exact(
    stream: bool,
) -> None:
    """Before the engine loads the model, whether its template has tool calls is not known
    (as `llama-cpp` says where its server does not): approximate, never exact."""
    local = allama.provider("local", model="model.gguf")
    assert isinstance(local, LlamaCppProvider) and local.engine is not None
    forced = ChatRequest("m").user("City: Paris").with_option(ExtractionMode.FORCED_TOOL)
    plan = Extractor().plan(local, City, forced, stream=stream)
    assert (plan.mode, plan.enforcement, plan.coverage) == (
        ExtractionMode.FORCED_TOOL,
        SchemaEnforcement.APPROXIMATE,
        ValidationCoverage.CAPABILITIES,
    )
    assert [(w.kind, w.message) for w in plan.degradations] == [
        (WarningKind.APPROXIMATED, NOT_KNOWN)
    ]
    assert plan.notes == ()
    # Native mode sends no tools: nothing to know there.
    native = Extractor().plan(local, City, forced.with_option(ExtractionMode.NATIVE))
    assert (native.enforcement, native.degradations) == (SchemaEnforcement.EXACT, ())
    assert not local.engine.running


def test_allama_plan_for_local_does_not_claim_a_forced_tool_exact(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", "model.gguf")  # never loaded by a plan
    invoice = f"{Path(__file__).resolve().parent.parent / 'examples' / 'invoice.py'}:Invoice"
    assert main(["plan", invoice, "--json", "--provider", "local"]) == 0
    rows = {row["mode"]: row for row in json.loads(capsys.readouterr().out)["plans"]}
    forced = rows["forced_tool"]
    assert forced["enforcement"] == "approximate"
    # Then the schema's own notes, as in native mode (which sends no tools, a dry run of
    # the call), and what a plan before the engine runs covers.
    assert forced["notes"] == [
        NOT_KNOWN,
        *rows["native"]["notes"],
        "capability table only: the schema is checked when sent",
    ]


NOT_INSTALLED = (
    "the local engine needs the llama.cpp server from xllamacpp, which is not installed (the "
    "call fails before sending): pip install 'allama[local]'"
)


@pytest.mark.parametrize("stream", [False, True])
def test_a_plan_without_the_engine_installed_says_so(
    stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the `local` extra the call fails before sending (`EngineNotInstalledError`):
    the plan says so in its notes, in the error's words, rather than plan an exact call."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # `import xllamacpp` fails
    local = allama.provider("local", model=model)
    assert isinstance(local, LlamaCppProvider) and local.engine is not None
    request = ChatRequest("m").user("City: Paris")
    native = Extractor().plan(
        local, City, request.with_option(ExtractionMode.NATIVE), stream=stream
    )
    assert (native.mode, native.enforcement, native.degradations) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.EXACT,
        (),
    )
    assert [(w.kind, w.message, w.provider) for w in native.notes] == [
        (WarningKind.UNSUPPORTED, NOT_INSTALLED, "local")
    ]
    assert native.request_warnings == ()
    forced = Extractor().plan(
        local, City, request.with_option(ExtractionMode.FORCED_TOOL), stream=stream
    )
    assert [w.message for w in forced.degradations] == [NOT_KNOWN]
    assert [w.message for w in forced.notes] == [NOT_INSTALLED]
    assert not local.engine.running
    with pytest.raises(EngineNotInstalledError):  # as the call does
        local.chat(request)


def test_allama_plan_for_local_without_the_engine_installed_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", "model.gguf")  # never loaded by a plan
    invoice = f"{Path(__file__).resolve().parent.parent / 'examples' / 'invoice.py'}:Invoice"
    assert main(["plan", invoice, "--json", "--provider", "local"]) == 0
    installed = json.loads(capsys.readouterr().out)["plans"]
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    assert main(["plan", invoice, "--json", "--provider", "local"]) == 0
    missing = json.loads(capsys.readouterr().out)["plans"]
    # The same plan, with the note after the plan's own (and before what it covers).
    native, forced = installed
    assert native["notes"] and native["notes"][-1] != NOT_INSTALLED
    assert forced["notes"][-1] == "capability table only: the schema is checked when sent"
    assert missing == [
        {**native, "notes": [*native["notes"], NOT_INSTALLED]},
        {**forced, "notes": [*forced["notes"][:-1], NOT_INSTALLED, forced["notes"][-1]]},
    ]


# 3. Engine failures


def test_a_missing_model_is_an_allama_not_found_error_not_retried(tmp_path: Path) -> None:
    local = allama.provider("local", model=tmp_path / "missing.gguf")
    sleeps: list[float] = []
    with pytest.raises(Error) as caught:
        RetryingProvider(local, sleep=sleeps.append).chat(ChatRequest("m").user("hi"))
    error = caught.value
    assert isinstance(error, ModelNotFoundError)
    assert isinstance(error, NotFoundError) and isinstance(error, FileNotFoundError)
    assert (error.retryable, error.provider, sleeps) == (False, "local", [])
    assert str(error) == (
        f"the model file named by model= does not exist: {tmp_path / 'missing.gguf'}"
    )
    with pytest.raises(ModelNotFoundError):
        allama.extract(local, City, ChatRequest("m").user("hi"))


def test_a_missing_engine_is_an_allama_not_found_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    local = allama.provider("local", model=model)
    with pytest.raises(Error) as caught:
        asyncio.run(local.achat(ChatRequest("m").user("hi")))
    error = caught.value
    assert isinstance(error, EngineNotInstalledError) and isinstance(error, ImportError)
    assert isinstance(error, NotFoundError)
    assert (error.retryable, error.provider) == (False, "local")
    assert "pip install 'allama[local]'" in str(error)


class _Params:
    """`xllamacpp.CommonParams`: nested settings, any of them set."""

    def __getattr__(self, name: str) -> _Params:
        value = _Params()
        object.__setattr__(self, name, value)
        return value


def _unloadable(params: object) -> object:
    raise RuntimeError("Failed to init server, please check the input params.")


def test_a_model_llama_cpp_cannot_load_is_an_allama_server_error_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "bad.gguf"
    model.write_bytes(b"not a gguf file")
    fake = types.SimpleNamespace(CommonParams=_Params, Server=_unloadable)
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    local = allama.provider("local", model=model)
    sleeps: list[float] = []
    with pytest.raises(Error) as caught:
        RetryingProvider(local, sleep=sleeps.append).chat(ChatRequest("m").user("hi"))
    error = caught.value
    assert isinstance(error, EngineStartError) and isinstance(error, RuntimeError)
    assert isinstance(error, ServerError)
    assert (error.retryable, error.provider, sleeps) == (False, "local", [])
    assert str(error) == (
        f"llama.cpp could not load {model}: Failed to init server, please check the input "
        "params. (the file is not a GGUF model: it does not begin with GGUF's magic bytes)"
    )
    # Sent to another process (a Ray worker's error), it stays itself and not retryable.
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is EngineStartError and not again.retryable
    assert again.provider == "local"


# 4. A full context


def _filled(finish: str = "length", completion: int = 101) -> httpx2.Response:
    return _answer("apple, banana,", finish=finish, prompt=155, completion=completion)


def test_a_generation_that_fills_the_slot_is_reported_as_the_context_window() -> None:
    local = _local(_Server(_filled()), _engine(slot=256))
    request = ChatRequest("m").user("List fifty fruits.").with_max_output_tokens(1000)
    assert local.chat(request).finish_reason == FinishReason.CONTEXT_WINDOW
    with pytest.raises(allama.TruncatedError) as cut:
        Extractor().extract(local, City, request)
    assert cut.value.finish_reason == FinishReason.CONTEXT_WINDOW
    assert "shorten the input, a higher output token limit does not help" in str(cut.value)


def test_a_generation_cut_at_its_token_limit_stays_length() -> None:
    request = ChatRequest("m").user("List fifty fruits.")
    # The limit reached, though the context is full too.
    at_limit = _local(_Server(_filled()), _engine(slot=256))
    assert at_limit.chat(request.with_max_output_tokens(101)).finish_reason == "length"
    # Room left in the slot: the limit cut it.
    roomy = _local(_Server(_filled(completion=20)), _engine(slot=256))
    assert roomy.chat(request.with_max_output_tokens(20)).finish_reason == "length"


def test_the_slot_is_the_context_shared_by_the_slots_when_the_server_does_not_say() -> None:
    engine = _engine(slot=None, context=512, parallel=2)
    local = _local(_Server(_filled()), engine)
    assert local.chat(ChatRequest("m").user("x")).finish_reason == FinishReason.CONTEXT_WINDOW


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {"id": "c", "model": "-", "object": "chat.completion.chunk", "choices": choices}
    return b"data: " + json.dumps({**body, **extra}).encode() + b"\n\n"


def _filled_stream(completion: int = 101) -> httpx2.Response:
    # As llama.cpp streams it: the finish, then the usage in a chunk of no choices.
    body = (
        _chunk([{"index": 0, "finish_reason": None, "delta": {"content": "apple,"}}])
        + _chunk([{"index": 0, "finish_reason": "length", "delta": {}}])
        + _chunk([], usage={"prompt_tokens": 155, "completion_tokens": completion})
        + b"data: [DONE]\n\n"
    )
    return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})


def test_a_stream_that_fills_the_slot_is_reported_as_the_context_window() -> None:
    local = _local(_Server(lambda request: _filled_stream()), _engine(slot=256))
    request = ChatRequest("m").user("List fifty fruits.").with_max_output_tokens(1000)
    events = list(local.chat_stream(request))
    ends = [e for e in events if isinstance(e, Finish | UsageEvent)]
    assert [type(e) for e in ends] == [Finish, UsageEvent]
    assert ends[0] == Finish(finish_reason=FinishReason.CONTEXT_WINDOW)
    assert local.chat_stream(request).response().finish_reason == FinishReason.CONTEXT_WINDOW
    at_limit = request.with_max_output_tokens(101)
    assert local.chat_stream(at_limit).response().finish_reason == FinishReason.LENGTH


def test_an_async_stream_that_fills_the_slot_is_reported_as_the_context_window() -> None:
    local = _local(_Server(lambda request: _filled_stream()), _engine(slot=256))
    request = ChatRequest("m").user("List fifty fruits.")

    async def run() -> FinishReason | None:
        stream = await local.achat_stream(request)
        return (await stream.response()).finish_reason

    assert asyncio.run(run()) == FinishReason.CONTEXT_WINDOW


# 5. Engine options of 0


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("threads", 0, "threads must be at least 1, got 0"),
        ("context", 0, "context must be at least 64, got 0"),
        ("parallel", 0, "parallel must be at least 1, got 0"),
        ("threads", -1, "threads must be at least 1, got -1"),
        ("context", 10, "context must be at least 64, got 10"),
    ],
)
def test_engine_options_below_their_least_are_refused(
    option: str, value: int, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        allama.provider("local", model="/nonexistent.gguf", **{option: value})
    assert str(refused.value) == message


# 6. A named tool not among the tools


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_a_named_tool_not_among_the_tools_is_refused(policy: UnsupportedPolicy) -> None:
    server = _Server()
    transport = _transport(server)
    provider = allama.provider("llama-cpp", base_url="http://llama.test/v1", transport=transport)
    request = (
        ChatRequest("m")
        .user("x")
        .with_tools([TOOL])
        .with_tool_choice(ToolChoice.tool("zzz"))
        .with_unsupported_policy(policy)
    )
    for call in (provider.validate_chat_request, provider.chat, _local(server).chat):
        with pytest.raises(InvalidRequestError) as refused:
            call(request)
        assert str(refused.value) == "tool_choice names `zzz`, which is not among the tools"
        assert not refused.value.retryable
    assert server.sent == []


# 7. Closing with a call in flight: on the real engine, with a tiny model


class _Lines(BaseModel):
    # Many items under a grammar: a long generation (seconds) from the tiny model.
    lines: list[str] = Field(min_length=1_500)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test models need the gguf package")
    from _tiny_gguf import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf").path


def _long_request() -> ChatRequest:
    schema = _Lines.model_json_schema()
    return (
        ChatRequest("tiny")
        .user("Many lines.")
        .with_max_output_tokens(3_000)
        .with_temperature(0)
        .with_response_format(
            allama.ResponseFormat(type="json_schema", json_schema=schema, name="l", strict=True)
        )
    )


def _short_request() -> ChatRequest:
    return ChatRequest("tiny").user("Hi.").with_max_output_tokens(5).with_temperature(0)


def _generating(engine: LocalEngine) -> None:
    """Wait until the engine's slot generates (llama.cpp's `/slots`): a call in flight."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        slots = httpx2.get(f"{engine.address}/slots", timeout=5).json()
        if any(slot.get("is_processing") for slot in slots):
            return
        time.sleep(0.02)
    raise AssertionError("the call never reached the engine")


def _closed_in_flight(error: Exception, address: str, model: str | None = "tiny") -> None:
    """`error` is the one of a call whose provider was closed under it, at `address`."""
    assert type(error) is Error
    where = re.escape(address.removeprefix("http://"))
    assert re.fullmatch(
        r"the provider's connections were closed \(close\(\) or aclose\(\)\) while the "
        rf"call to {where} was in flight \(\w+Error\)",
        str(error),
    ), str(error)
    assert (error.retryable, error.provider, error.model) == (False, "local", model)


@pytest.mark.local
def test_closing_local_under_a_sync_call_fails_it_as_closed_and_no_retry_restarts_it(
    tiny: Path,
) -> None:
    provider = allama.provider("local", model=tiny)
    assert isinstance(provider, LlamaCppProvider) and provider.engine is not None
    engine = provider.engine
    provider.start()
    address = engine.address
    sleeps: list[float] = []
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(RetryingProvider(provider, sleep=sleeps.append).chat(_long_request()))
        except Exception as error:
            outcome.append(error)

    asking = threading.Thread(target=ask)
    asking.start()
    try:
        _generating(engine)
    finally:
        provider.close()
        asking.join(60)
    (error,) = outcome
    assert isinstance(error, Exception)
    _closed_in_flight(error, address)
    assert sleeps == []  # not retried: a retry would start the engine and generate again
    assert not engine.running


@pytest.mark.local
def test_closing_local_under_a_sync_extraction_stream_fails_it_as_closed(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = allama.provider("local", model=tiny)
    assert isinstance(provider, LlamaCppProvider) and provider.engine is not None
    engine = provider.engine
    provider.start()
    address = engine.address
    begun, ended = threading.Event(), threading.Event()
    outcome: list[object] = []
    # The stream's read wakes as the engine stops; its client is let go only after that
    # read failed (stopping a bigger model's engine takes that long).
    transport = provider._transport
    close = transport.close

    def close_after_the_read() -> None:
        ended.wait(30)
        close()

    monkeypatch.setattr(transport, "close", close_after_the_read)

    def read() -> None:
        try:
            with allama.extract_stream(provider, _Lines, _long_request()) as stream:
                for _ in stream:
                    if getattr(stream.partial, "lines", None):
                        begun.set()
            outcome.append(stream)
        except Exception as error:
            outcome.append(error)
        ended.set()
        begun.set()

    reading = threading.Thread(target=read)
    reading.start()
    try:
        assert begun.wait(60)
    finally:
        provider.close()
        reading.join(60)
    (error,) = outcome
    assert isinstance(error, Exception)
    _closed_in_flight(error, address, model=None)  # (a stream's read names no model)
    assert not engine.running


@pytest.mark.local
def test_a_forced_tool_extraction_on_the_real_engine_without_tool_calls_sends_nothing(
    tiny: Path,
) -> None:
    """The tiny model's ChatML template has no tool calls: the call loads the model to learn
    that, and refuses before the engine is asked anything (no slot ever took a task)."""
    with allama.provider("local", model=tiny) as provider:
        assert isinstance(provider, LlamaCppProvider) and provider.engine is not None
        engine = provider.engine
        request = ChatRequest("tiny").user("City: Paris").with_max_output_tokens(40)
        forced = request.with_option(ExtractionMode.FORCED_TOOL)
        cold = Extractor().plan(provider, City, forced)
        assert [w.message for w in cold.degradations] == [NOT_KNOWN]
        with pytest.raises(UnsupportedError) as refused:
            Extractor(retries=2).extract(provider, City, forced)
        assert str(refused.value) == REFUSED
        with pytest.raises(UnsupportedError) as arefused:
            asyncio.run(Extractor(retries=2).aextract(provider, City, forced))
        assert str(arefused.value) == REFUSED
        slots = httpx2.get(f"{engine.address}/slots", timeout=5).json()
        assert [slot.get("id_task") for slot in slots] == [None]  # never given one
        native = allama.extract(provider, City, forced.with_option(ExtractionMode.NATIVE))
        assert native.value == City(city="")


_STARTING_CLOSED = (
    "the provider's connections were closed (close() or aclose()) while the call to the "
    "local engine was in flight (starting it); a call made after the close starts it again"
)


def _slow_load(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Hold llama.cpp's load of the model until the second event is set; the first is set
    as it begins."""
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    loading, loaded = threading.Event(), threading.Event()

    def server(params: object) -> object:
        loading.set()
        loaded.wait(60)
        return xllamacpp.Server(params)

    slow = types.SimpleNamespace(CommonParams=xllamacpp.CommonParams, Server=server)
    monkeypatch.setitem(sys.modules, "xllamacpp", slow)
    return loading, loaded


@pytest.mark.local
def test_closing_local_while_a_sync_call_loads_the_model_fails_it_and_starts_nothing(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loading, loaded = _slow_load(monkeypatch)
    provider = allama.provider("local", model=tiny)
    assert isinstance(provider, LlamaCppProvider) and provider.engine is not None
    engine = provider.engine
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(provider.chat(_short_request()))
        except Exception as error:
            outcome.append(error)

    asking = threading.Thread(target=ask)
    asking.start()
    closing = threading.Thread(target=provider.close)
    try:
        assert loading.wait(60)
        closing.start()
        time.sleep(0.2)  # the close has begun: it waits for the load to stop the engine
    finally:
        loaded.set()
        closing.join(60)
        asking.join(60)
    (error,) = outcome
    assert type(error) is Error and str(error) == _STARTING_CLOSED
    assert (error.retryable, error.provider, error.model) == (False, "local", "tiny")
    assert not engine.running
    # A call made after the close starts the engine again.
    try:
        assert provider.chat(_short_request()).usage is not None
        assert engine.running
    finally:
        provider.close()
    assert not engine.running


@pytest.mark.local
def test_aclosing_local_while_an_async_call_loads_the_model_fails_it_and_starts_nothing(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loading, loaded = _slow_load(monkeypatch)
    provider = allama.provider("local", model=tiny)
    assert isinstance(provider, LlamaCppProvider) and provider.engine is not None
    engine = provider.engine
    release = threading.Timer(0.2, loaded.set)

    async def run() -> BaseException | None:
        task = asyncio.create_task(provider.achat(_short_request()))
        try:
            assert await asyncio.to_thread(loading.wait, 60)
            release.start()  # after the close has begun: it waits for the load
            await provider.aclose()
            assert not engine.running
        finally:
            loaded.set()
            await asyncio.wait([task])
        return task.exception()

    try:
        error = asyncio.run(run())
    finally:
        release.join(60)
        provider.close()
    assert type(error) is Error and str(error) == _STARTING_CLOSED
    assert (error.retryable, error.provider, error.model) == (False, "local", "tiny")
    assert not engine.running


def test_a_gguf_file_llama_cpp_cannot_load_says_what_may_have_stopped_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp's own words are the same whatever the cause: too little memory for the
    # context asked for among them, which a smaller context= mends.
    model = tmp_path / "cut.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00")
    fake = types.SimpleNamespace(CommonParams=_Params, Server=_unloadable)
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    with pytest.raises(EngineStartError) as caught:
        allama.provider("local", model=model, context=65536).chat(ChatRequest("m").user("hi"))
    assert str(caught.value) == (
        f"llama.cpp could not load {model}: Failed to init server, please check the input "
        "params. (a GGUF file cut short, or of a version this llama.cpp does not read, or too "
        "little memory for a context of 65536 tokens in 1 slot(s): a smaller context= or "
        "parallel= needs less)"
    )


def test_a_folder_given_as_the_model_is_said_to_be_one(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        allama.provider("local", model=tmp_path).chat(ChatRequest("m").user("hi"))
    assert str(caught.value) == (
        f"the model named by model= is a folder, not a GGUF file: {tmp_path}"
    )
