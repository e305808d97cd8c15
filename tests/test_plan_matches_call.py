"""`Extractor.plan` with ENCODING coverage is a dry run of the call: its mode, enforcement and
degradations are the ones the call records, and a floor is checked against them before
anything is sent. Where the dry run cannot tell, the plan says so (CAPABILITIES coverage).

- `local` before its engine runs: tools and images are encoded by the running engine's
  answers (its model's chat template, its vision projector), which nothing knows before it
  starts, and a plan does not start it.
- Azure OpenAI on an `api-version` before 2024-08-01-preview: no JSON Schema output (Azure
  answers 400 to `json_schema`), and no `strict` on tools known.

The llama.cpp engine is faked as tests/test_local_honesty.py fakes it: its start sets the
properties llama.cpp's `/props` answers, its HTTP calls go to a mock transport.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import (
    ChatRequest,
    EnforcementBelowError,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    SchemaEnforcement,
)
from allama.adapters.openai_compat import CapabilityTable, ModelFamily, StructuredLevel
from allama.errors import UnsupportedError
from allama.extract import ExtractionPlan
from allama.local import LlamaCppProvider, LocalEngine
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ImagePart,
    RequestField,
    ValidationCoverage,
    WarningKind,
)

NO_TOOLS = {"supports_tool_calls": False, "supports_parallel_tool_calls": False}
WITH_TOOLS = {"supports_tool_calls": True, "supports_parallel_tool_calls": True}
COLD = (
    "the local llama.cpp engine has not loaded the model yet, so whether its chat template "
    "has tool calls is not known (start() first for the answer); a template without them "
    "takes no tools"
)
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
    b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\xdac\xfc\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff"
    b"\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)


class Person(BaseModel):
    name: str
    age: int


ADA = {"name": "Ada", "age": 36}


# A fake OpenAI-family server: the value as text, or as a call of the tool it was sent.


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    body = {"id": "c", "model": "m", "object": "chat.completion.chunk", "choices": choices}
    return b"data: " + json.dumps({**body, **extra}).encode() + b"\n\n"


def _answer(body: dict[str, Any]) -> httpx2.Response:
    tools = body.get("tools")
    arguments = json.dumps(ADA)
    usage = {"prompt_tokens": 12, "completion_tokens": 8}
    if body.get("stream"):
        if tools:
            call = {"index": 0, "id": "call_1", "type": "function"}
            call["function"] = {"name": tools[0]["function"]["name"], "arguments": arguments}
            delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": arguments}, "stop"
        content = (
            _chunk([{"index": 0, "finish_reason": None, "delta": delta}])
            + _chunk([{"index": 0, "finish_reason": finish, "delta": {}}])
            + _chunk([], usage=usage)
            + b"data: [DONE]\n\n"
        )
        return httpx2.Response(200, content=content, headers={"content-type": "text/event-stream"})
    message: dict[str, Any] = {"role": "assistant", "content": arguments}
    finish = "stop"
    if tools:
        function = {"name": tools[0]["function"]["name"], "arguments": arguments}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
        }
        finish = "tool_calls"
    choice = {"index": 0, "finish_reason": finish, "message": message}
    return httpx2.Response(200, json={"id": "c", "model": "m", "choices": [choice], "usage": usage})


class _Server:
    def __init__(
        self,
        refuse: Callable[[httpx2.Request, dict[str, Any]], httpx2.Response | None] | None = None,
    ) -> None:
        self.sent: list[dict[str, Any]] = []
        self.urls: list[str] = []
        self.refuse = refuse

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.sent.append(body)
        self.urls.append(str(request.url))
        refused = self.refuse(request, body) if self.refuse is not None else None
        return refused if refused is not None else _answer(body)

    def transport(self) -> Transport:
        return Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


def _record(
    provider: Any, request: ChatRequest, *, stream: bool, floor: SchemaEnforcement | None = None
) -> ExtractionMetadata:
    """The record of the extraction, or of its failure (a floor's, a tool left uncalled)."""
    extractor = Extractor(min_enforcement=floor)
    try:
        if stream:
            with extractor.extract_stream(provider, Person, request) as streamed:
                for _ in streamed:
                    pass
                result = streamed.finish()
        else:
            result = extractor.extract(provider, Person, request)
    except Exception as error:
        record = ExtractionMetadata.from_error(error)
        if record is None:
            raise
        return record
    assert result.value == Person(**ADA)
    return result.metadata


def _figures(plan: ExtractionPlan) -> tuple[Any, ...]:
    return plan.mode, plan.enforcement, [w.message for w in plan.degradations]


def _recorded(record: ExtractionMetadata) -> tuple[Any, ...]:
    return record.mode, record.enforcement, [w.message for w in record.degradations]


def _request(mode: ExtractionMode) -> ChatRequest:
    request = ChatRequest("smollm2").user("Ada Lovelace is 36.")
    return request if mode is ExtractionMode.AUTO else request.with_option(mode)


# 1. `local`: the engine's answers are unknown before it runs


class _Engine(LocalEngine):
    """A llama.cpp engine whose start is faked: it answers `/props` as llama.cpp does, for a
    chat template with or without tool calls and a model without vision."""

    def __init__(self, caps: dict[str, bool]) -> None:
        super().__init__("model.gguf")
        self.caps = caps
        self.starts = 0

    def _start(self) -> None:
        self.starts += 1
        self._server = object()
        self._address = "http://127.0.0.1:9"
        self.properties = {
            "chat_template_caps": self.caps,
            "modalities": {"vision": False, "video": False, "audio": False},
            "default_generation_settings": {"n_ctx": 4096},
        }


def _local(caps: dict[str, bool], server: _Server, **options: Any) -> LlamaCppProvider:
    local = allama.provider("local", engine=_Engine(caps), transport=server.transport(), **options)
    assert isinstance(local, LlamaCppProvider)
    return local


@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_tool_planned_before_the_engine_runs_promises_no_figures(stream: bool) -> None:
    server = _Server()
    local = _local(NO_TOOLS, server)
    request = _request(ExtractionMode.FORCED_TOOL)
    cold = Extractor().plan(local, Person, request, stream=stream)
    # Nothing said the chat template has tool calls: not a dry run of the call, and not
    # claimed exact.
    assert cold.coverage is ValidationCoverage.CAPABILITIES
    assert (cold.mode, cold.enforcement) == (
        ExtractionMode.FORCED_TOOL,
        SchemaEnforcement.APPROXIMATE,
    )
    assert cold.degradations[0].message == COLD
    assert isinstance(local.engine, _Engine) and local.engine.starts == 0
    assert local.chat_capability("smollm2", ChatCapability.TOOL_CALLS) is CapabilitySupport.UNKNOWN
    # So the floor is checked on the call, which starts the engine; its template has no
    # tools, so the extraction's tool is refused before anything is sent.
    record = _record(local, request, stream=stream, floor=SchemaEnforcement.EXACT)
    assert (record.mode, record.passes) == (ExtractionMode.FORCED_TOOL, 0)
    assert local.engine.starts == 1 and server.sent == []
    # Once it runs, the plan is the dry run, and refuses as the call did.
    with pytest.raises(UnsupportedError) as refused:
        Extractor().plan(local, Person, request, stream=stream)
    assert refused.value.field is RequestField.TOOLS
    assert local.chat_capability("smollm2", ChatCapability.TOOL_CALLS) is (
        CapabilitySupport.UNSUPPORTED
    )
    assert server.sent == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "mode", [ExtractionMode.AUTO, ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL]
)
@pytest.mark.parametrize("caps", [NO_TOOLS, WITH_TOOLS], ids=["no_tools", "with_tools"])
def test_local_plans_what_the_call_records_cold_and_warm(
    caps: dict[str, bool], mode: ExtractionMode, stream: bool
) -> None:
    server = _Server()
    local = _local(caps, server)
    request = _request(mode)
    cold = Extractor().plan(local, Person, request, stream=stream)
    forced = mode is ExtractionMode.FORCED_TOOL
    record = _record(local, request, stream=stream)
    if forced and caps is NO_TOOLS:
        # The extraction's tool, left out, could never be called: refused before sending,
        # by the call and by the plan once the engine said so.
        assert (record.passes, server.sent) == (0, [])
        with pytest.raises(UnsupportedError):
            Extractor().plan(local, Person, request, stream=stream)
        assert cold.coverage is ValidationCoverage.CAPABILITIES
        return
    warm = Extractor().plan(local, Person, request, stream=stream)
    assert warm.coverage is ValidationCoverage.ENCODING
    assert _figures(warm) == _recorded(record)
    if cold.coverage is ValidationCoverage.ENCODING:
        assert _figures(cold) == _recorded(record)
    # Only a forced tool waits on the engine's word: auto and native take its grammar.
    expected = ValidationCoverage.CAPABILITIES if forced else ValidationCoverage.ENCODING
    assert cold.coverage is expected
    # (`Person.age` is an `int`: the grammar writes integers only within 64 bits.)
    assert record.enforcement is SchemaEnforcement.APPROXIMATE


def test_an_image_checked_before_the_engine_runs_is_not_a_dry_run() -> None:
    server = _Server()
    local = _local(NO_TOOLS, server)
    request = ChatRequest("smollm2").user("Describe.", ImagePart(data=PNG, media_type="image/png"))
    cold = local.validate_chat_request(request)
    assert (cold.coverage, cold.warnings) == (ValidationCoverage.CAPABILITIES, ())
    assert local.chat_capability("smollm2", ChatCapability.IMAGE_INPUT) is (
        CapabilitySupport.UNKNOWN
    )
    response = local.chat(request)
    message = "`smollm2` on the local llama.cpp engine takes no images; the image was left out"
    assert [(w.kind, w.message) for w in response.warnings] == [(WarningKind.UNSUPPORTED, message)]
    warm = local.validate_chat_request(request, stream=True)
    assert warm.coverage is ValidationCoverage.ENCODING
    assert warm.warnings == response.warnings
    # A request without tools or images is the dry run of its call, cold or not.
    plain = _local(NO_TOOLS, _Server()).validate_chat_request(ChatRequest("m").user("Hi"))
    assert plain.coverage is ValidationCoverage.ENCODING


def test_a_table_of_the_callers_does_not_answer_for_the_engine_before_it_runs() -> None:
    table = CapabilityTable(
        (), ModelFamily("*", StructuredLevel.STRICT, images=CapabilitySupport.SUPPORTED)
    )
    local = _local(NO_TOOLS, _Server(), capabilities=table)
    for capability in (ChatCapability.TOOL_CALLS, ChatCapability.IMAGE_INPUT):
        assert local.chat_capability("m", capability) is CapabilitySupport.UNKNOWN
    local.start()
    for capability in (ChatCapability.TOOL_CALLS, ChatCapability.IMAGE_INPUT):
        assert local.chat_capability("m", capability) is CapabilitySupport.UNSUPPORTED


# 2. Azure OpenAI on an api-version before structured outputs

RESOURCE = "https://res.openai.azure.com"
OLD = "2024-06-01"
NO_SCHEMA = (
    "`gpt-4o` on Azure OpenAI before api-version 2024-08-01-preview has no JSON Schema "
    "output; the schema of `Person` was sent as `json_object`, which only constrains the "
    "output to a JSON object, with the schema written into the instructions"
)
NO_STRICT = (
    "Azure OpenAI before api-version 2024-08-01-preview does not enforce `strict` on tools; "
    "the schema of `Person` was sent without it"
)


def _azure_refusal(request: httpx2.Request, body: dict[str, Any]) -> httpx2.Response | None:
    """Azure's 400 to what an api-version before 2024-08-01-preview does not take."""
    version = request.url.params.get("api-version")
    if version is None or version >= "2024-08-01":
        return None
    fmt = body.get("response_format") or {}
    strict = any(tool["function"].get("strict") for tool in body.get("tools", ()))
    if fmt.get("type") != "json_schema" and not strict:
        return None
    message = (
        "response_format value as json_schema is enabled only for api versions "
        "2024-08-01-preview and later"
    )
    return httpx2.Response(400, json={"error": {"code": "BadRequest", "message": message}})


def _azure(server: _Server, **options: Any) -> Any:
    options.setdefault("endpoint", RESOURCE)
    return allama.provider("azure-openai", api_key="k", transport=server.transport(), **options)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("mode", "planned", "message"),
    [
        (ExtractionMode.AUTO, ExtractionMode.FORCED_TOOL, NO_STRICT),
        (ExtractionMode.NATIVE, ExtractionMode.NATIVE, NO_SCHEMA),
        (ExtractionMode.FORCED_TOOL, ExtractionMode.FORCED_TOOL, NO_STRICT),
    ],
)
def test_an_old_azure_api_version_plans_what_the_call_sends_and_records(
    mode: ExtractionMode, planned: ExtractionMode, message: str, stream: bool
) -> None:
    server = _Server(_azure_refusal)
    azure = _azure(server, api_version=OLD)
    request = ChatRequest("gpt-4o").user("Ada Lovelace is 36.")
    request = request if mode is ExtractionMode.AUTO else request.with_option(mode)
    plan = Extractor().plan(azure, Person, request, stream=stream)
    assert plan.coverage is ValidationCoverage.ENCODING
    assert _figures(plan) == (planned, SchemaEnforcement.NOT_ENFORCED, [message])
    record = _record(azure, request, stream=stream)
    assert _recorded(record) == _figures(plan)
    assert record.passes == 1 and record.auto_fallback is None
    sent = server.sent[0]
    assert server.urls[0].endswith(f"/openai/deployments/gpt-4o/chat/completions?api-version={OLD}")
    if planned is ExtractionMode.NATIVE:
        assert sent["response_format"] == {"type": "json_object"}
    else:
        assert "response_format" not in sent
        assert [tool["function"].get("strict") for tool in sent["tools"]] == [None]
        assert "parallel_tool_calls" not in sent


def test_an_exact_floor_on_an_old_azure_api_version_fails_before_sending() -> None:
    server = _Server(_azure_refusal)
    azure = _azure(server, api_version=OLD)
    request = ChatRequest("gpt-4o").user("Ada Lovelace is 36.")
    with pytest.raises(EnforcementBelowError) as below:
        Extractor(min_enforcement=SchemaEnforcement.EXACT).extract(azure, Person, request)
    assert below.value.achieved is SchemaEnforcement.NOT_ENFORCED
    assert below.value.metadata.passes == 0
    assert [w.message for w in below.value.metadata.degradations] == [NO_STRICT]
    assert server.sent == []
    unsupported = CapabilitySupport.UNSUPPORTED
    assert azure.chat_capability("gpt-4o", ChatCapability.STRUCTURED_OUTPUT) is unsupported
    assert below.value.metadata.degradations[0].is_about(RequestField.TOOLS)


@pytest.mark.parametrize(
    "options",
    [
        {"api_version": "2024-08-01-preview"},
        {"api_version": "2024-10-21"},
        {"api_version": "2025-04-01-preview"},
        {},  # the preset's 2024-10-21
        # The v1 API sends no api-version (a dated one given is refused).
        {"endpoint": f"{RESOURCE}/openai/v1"},
    ],
)
def test_azure_with_structured_outputs_plans_and_sends_a_strict_schema(
    options: dict[str, Any],
) -> None:
    server = _Server(_azure_refusal)
    azure = _azure(server, **options)
    request = ChatRequest("gpt-4o").user("Ada Lovelace is 36.")
    plan = Extractor().plan(azure, Person, request)
    assert _figures(plan) == (ExtractionMode.NATIVE, SchemaEnforcement.EXACT, [])
    record = _record(azure, request, stream=False, floor=SchemaEnforcement.EXACT)
    assert _recorded(record) == _figures(plan)
    assert server.sent[0]["response_format"]["type"] == "json_schema"
    assert server.sent[0]["response_format"]["json_schema"]["strict"] is True


def test_an_old_api_version_from_the_environment_or_the_endpoint_limits_a_table_of_the_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = CapabilityTable((), ModelFamily("*", StructuredLevel.STRICT))
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-07-01-preview")
    for options in ({"capabilities": table}, {"endpoint": f"{RESOURCE}?api-version={OLD}"}):
        server = _Server(_azure_refusal)
        azure = _azure(server, **options)
        unsupported = CapabilitySupport.UNSUPPORTED
        assert azure.chat_capability("dep", ChatCapability.STRUCTURED_OUTPUT) is unsupported
        request = ChatRequest("dep").user("Ada Lovelace is 36.").with_option(ExtractionMode.NATIVE)
        record = _record(azure, request, stream=False)
        assert record.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert server.sent[0]["response_format"] == {"type": "json_object"}
