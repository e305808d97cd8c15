"""Encoding for Ollama's native API (`POST /api/chat`): the URL and its `OLLAMA_HOST`, the
body, the warnings and refusals of what Ollama cannot honour, the capability answers, and
what an extraction plans on it."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.adapters.ollama import _encode
from allama.errors import InvalidRequestError, UnsupportedError
from allama.extract import ModeUnsupportedError
from allama.providers import HttpProvider
from allama.providers._hosts import host_url
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    DocumentPart,
    FieldSubject,
    ImagePart,
    Reasoning,
    Refusal,
    RequestField,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    Warning,
    WarningKind,
)

MODEL = "llama3.1"
PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}
PNG = b"\x89PNG\r\n\x1a\n"
PNG_B64 = base64.b64encode(PNG).decode()


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def encode(
    request: ChatRequest, *, stream: bool = False, **options: Any
) -> tuple[str, dict[str, str], dict[str, Any], list[Warning]]:
    target: HttpProvider = allama.provider("ollama", **options)
    http, warnings = target._prepare(request, stream=stream)
    assert json.loads(http.content) == http.body
    assert dict(http.params) == {}
    return http.url, dict(http.headers), http.body, warnings


def fields(warnings: list[Warning]) -> list[tuple[str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind)) for w in warnings]


# Where the server is, and who may call it


def test_url_headers_and_a_plain_body() -> None:
    url, headers, body, warnings = encode(ChatRequest(MODEL).user("Hi"))
    assert url == "http://localhost:11434/api/chat"
    # No key is needed, and none is sent.
    assert headers == {"content-type": "application/json", "accept": "application/json"}
    # `stream: false` is always sent: Ollama streams unless told not to. `truncate: false`
    # too: Ollama cuts a prompt past its context unless told not to.
    assert body == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": False,
        "truncate": False,
    }
    assert warnings == []


def test_a_stream_asks_for_ndjson() -> None:
    url, headers, body, _ = encode(ChatRequest(MODEL).user("Hi"), stream=True)
    assert url == "http://localhost:11434/api/chat"
    assert headers["accept"] == "application/x-ndjson"
    assert body["stream"] is True


def test_a_key_goes_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    _, headers, _, _ = encode(ChatRequest(MODEL).user("Hi"), api_key="ollama-key")
    assert headers["authorization"] == "Bearer ollama-key"
    monkeypatch.setenv("OLLAMA_API_KEY", "from-env")
    target = allama.provider("ollama", base_url="https://ollama.com")
    http, _ = target._prepare(ChatRequest("gpt-oss:120b").user("Hi"), stream=False)
    assert http.url == "https://ollama.com/api/chat"
    assert http.headers["authorization"] == "Bearer from-env"
    assert "from-env" not in repr(target)


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("127.0.0.1:11434", "http://127.0.0.1:11434"),
        # The server's own setting to listen everywhere: this machine, for a client.
        ("0.0.0.0:8080", "http://127.0.0.1:8080"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("[::]:11434", "http://[::1]:11434"),
        ("::", "http://[::1]:11434"),
        ("ollama.internal", "http://ollama.internal:11434"),
        (":9999", "http://127.0.0.1:9999"),
        ("gpu-box:11434/ollama/", "http://gpu-box:11434/ollama"),
        ("[fd00::7]:11434", "http://[fd00::7]:11434"),
        ("fd00::7", "http://[fd00::7]:11434"),
        ("  'example.com:1234'  ", "http://example.com:1234"),
        ('"example.com"', "http://example.com:11434"),
        # With a scheme, the scheme's own port.
        ("https://ollama.example.com/", "https://ollama.example.com"),
        ("http://example.com:8000", "http://example.com:8000"),
        ("http://0.0.0.0:11434", "http://127.0.0.1:11434"),
        # Ollama's cloud by its name alone, over TLS (its key goes with every request).
        ("ollama.com", "https://ollama.com"),
        ("ollama.com:443", "http://ollama.com:443"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(
    monkeypatch: pytest.MonkeyPatch, value: str, url: str
) -> None:
    assert host_url(value, 11434) == url
    monkeypatch.setenv("OLLAMA_HOST", value)
    target = allama.provider("ollama")
    assert target.base_url == url
    http, _ = target._prepare(ChatRequest(MODEL).user("Hi"), stream=False)
    assert http.url == f"{url}/api/chat"


def test_base_url_wins_over_ollama_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:8080")
    assert allama.provider("ollama", base_url="http://box:11434/").base_url == "http://box:11434"
    monkeypatch.setenv("OLLAMA_HOST", "")
    assert allama.provider("ollama").base_url == "http://localhost:11434"


def test_the_openai_compatible_path_is_another_preset() -> None:
    with pytest.raises(ValueError, match="ollama-openai"):
        allama.provider("ollama", base_url="http://localhost:11434/v1")
    # The alias `ollama` names the native API; `ollama-openai` stays what it was.
    assert allama.provider("ollama").preset.dialect == "ollama"
    assert allama.provider("OLLAMA").name == "ollama"
    openai = allama.provider("ollama-openai")
    assert openai.preset.dialect == "openai_compat"
    assert openai.base_url == "http://localhost:11434/v1"


@pytest.mark.parametrize(
    "base_url",
    [
        "http://box:11434/api",
        "http://box:11434/api/",
        "http://box:11434/api/chat",
        "http://box:11434/API/Chat",
    ],
)
def test_a_base_url_ending_in_the_api_path_is_cut(base_url: str) -> None:
    """Ollama's documentation writes its cloud's base URL `https://ollama.com/api`: the path
    each call adds (`/api/chat`) starts there, and is not sent twice."""
    target = allama.provider("ollama", base_url=base_url)
    assert target.base_url == "http://box:11434"
    http, _ = target._prepare(ChatRequest(MODEL).user("Hi"), stream=False)
    assert http.url == "http://box:11434/api/chat"
    # A path that only ends in the same letters is the caller's.
    assert allama.provider("ollama", base_url="http://box/myapi").base_url == "http://box/myapi"


# Messages


def test_roles_images_and_joined_text() -> None:
    request = (
        ChatRequest(MODEL)
        .system("Be brief.")
        .developer("Answer in French.")
        .push(
            UserMessage(
                content=(
                    TextPart(text="Look"),
                    ImagePart(data=PNG, media_type="image/png"),
                    TextPart(text="and this one"),
                    ImagePart(url=f"data:image/png;base64,{PNG_B64}"),
                )
            )
        )
    )
    _, _, body, warnings = encode(request)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Look\n\nand this one", "images": [PNG_B64, PNG_B64]},
    ]
    assert warnings == []


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_an_image_url_cannot_be_sent(policy: UnsupportedPolicy) -> None:
    request = (
        ChatRequest(MODEL)
        .user("What is this?", ImagePart(url="https://example.com/cat.jpg"))
        .with_unsupported_policy(policy)
    )
    if policy is UnsupportedPolicy.ERROR:
        with pytest.raises(UnsupportedError) as caught:
            encode(request)
        assert caught.value.field is RequestField.IMAGES
        assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
        return
    _, _, body, warnings = encode(request)
    assert body["messages"] == [{"role": "user", "content": "What is this?"}]
    assert fields(warnings) == [("images", "unsupported")]
    assert "not by URL" in warnings[0].message


def test_an_image_data_url_must_be_base64() -> None:
    request = ChatRequest(MODEL).user("x", ImagePart(url="data:image/svg+xml,<svg/>"))
    with pytest.raises(InvalidRequestError, match="base64"):
        encode(request)


def test_documents_plain_text_as_text_and_the_rest_refused() -> None:
    request = ChatRequest(MODEL).user(
        "Summarise",
        DocumentPart(data="héllo wörld".encode(), media_type="text/plain", title="notes"),
        DocumentPart(data=b"%PDF-1.7", media_type="application/pdf"),
        DocumentPart(url="https://example.com/a.txt"),
    )
    _, _, body, warnings = encode(request)
    assert body["messages"] == [{"role": "user", "content": "Summarise\n\nhéllo wörld"}]
    assert fields(warnings) == [("documents", "unsupported")] * 2
    assert [w.message for w in warnings] == [
        "Ollama takes plain-text documents only, not application/pdf; it was left out",
        "Ollama takes no document by URL, only plain text given as bytes or in a data URL; "
        "it was left out",
    ]
    # Bytes that are no text are the caller's to mend: refused before sending, as every
    # encoder that sends a document as its text refuses them.
    unreadable = DocumentPart(data=b"\xff\xfe", media_type="text/plain")
    with pytest.raises(InvalidRequestError) as refused:
        encode(ChatRequest(MODEL).user("x", unreadable))
    assert str(refused.value) == "a text/plain document must be UTF-8 text"
    pdf = ChatRequest(MODEL).user("x", DocumentPart(data=b"%PDF", media_type="application/pdf"))
    with pytest.raises(UnsupportedError) as caught:
        encode(pdf.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.DOCUMENTS


def test_assistant_turns_thinking_calls_and_tool_results() -> None:
    numbered = ToolCall.of("call_0", "get_weather", {"city": "Paris", "unit": "C"})
    named = ToolCall.of("call_gsiiy8py", "get_weather", {"city": "Zürich"})
    request = (
        ChatRequest(MODEL)
        .user("Weather?")
        .assistant(
            [
                Reasoning(text="Two cities.", signature="other-providers-signature"),
                TextPart(text="Let me check."),
                numbered,
                named,
            ]
        )
        .tool_result(numbered, "18C")
        .tool_result(named, "12C")
        .tool_result("call_unknown", "no such call")
        .assistant([Refusal(text="I cannot.")])
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "thinking": "Two cities.",
            "tool_calls": [
                # The decoder's numbered id is not Ollama's: it is not sent back.
                {"function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}},
                {
                    "id": "call_gsiiy8py",
                    "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
                },
            ],
        },
        {"role": "tool", "content": "18C", "tool_name": "get_weather"},
        {
            "role": "tool",
            "content": "12C",
            "tool_name": "get_weather",
            "tool_call_id": "call_gsiiy8py",
        },
        # A result of a call the conversation does not hold: its id, but no function name.
        {"role": "tool", "content": "no such call", "tool_call_id": "call_unknown"},
        {"role": "assistant", "content": "I cannot."},
    ]
    # Arguments keep their key order on the wire.
    assert list(body["messages"][1]["tool_calls"][0]["function"]["arguments"]) == ["city", "unit"]
    assert warnings == []


def test_a_failed_tool_result_has_no_flag_to_carry_it() -> None:
    call = ToolCall.of("call_1", "f", {})
    request = ChatRequest(MODEL).user("x").assistant([call])
    request = request.tool_result(call, "boom", is_error=True)
    _, _, body, warnings = encode(request)
    assert body["messages"][-1] == {"role": "tool", "content": "boom", "tool_name": "f"}
    assert fields(warnings) == [("tool_result_error", "unsupported")]


def test_call_arguments_must_be_an_object() -> None:
    call = ToolCall(id="call_x", name="f", arguments="[1, 2]")
    with pytest.raises(InvalidRequestError, match="not a JSON object"):
        encode(ChatRequest(MODEL).user("x").assistant([call]))


# Sampling, options and thinking


def test_options_and_the_option_namespace() -> None:
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_temperature(0.2)
        .with_top_p(0.9)
        .with_seed(42)
        .with_max_output_tokens(256)
        .with_stop("###", "END")
        .with_option_json(
            "ollama",
            {"options": {"num_ctx": 8192, "top_p": 0.5}, "keep_alive": "10m", "truncate": False},
        )
    )
    _, _, body, warnings = encode(request)
    assert body["options"] == {
        "temperature": 0.2,
        "top_p": 0.5,  # the namespace's own value wins
        "seed": 42,
        "num_predict": 256,
        "stop": ["###", "END"],
        "num_ctx": 8192,
    }
    assert body["keep_alive"] == "10m" and body["truncate"] is False
    assert warnings == []
    _, _, body, _ = encode(ChatRequest(MODEL).user("Hi").with_option_json("ollama", {"x": 1}))
    assert "options" not in body and body["x"] == 1


@pytest.mark.parametrize(
    ("theirs", "kind"),
    [
        (None, "null"),
        ("num_ctx=8192", "a string"),
        ([["num_ctx", 8192]], "a list"),
        (3, "a number"),
    ],
)
def test_body_option_options_that_are_no_object_are_refused(theirs: Any, kind: str) -> None:
    """Ollama reads `options` as an object of model parameters alone (a 400 otherwise): one
    of another kind is not sent, with a warning, and the request's own parameters are."""
    request = (
        ChatRequest(MODEL, temperature=0.5)
        .user("Hi")
        .with_option_json("ollama", {"options": theirs, "keep_alive": "5m"})
    )
    _, _, body, warnings = encode(request)
    assert body["options"] == {"temperature": 0.5} and body["keep_alive"] == "5m"
    assert [(w.subject, w.kind, w.message) for w in warnings] == [
        (
            FieldSubject(field=RequestField.OPTIONS),
            WarningKind.UNSUPPORTED,
            f"`options` of the body option `ollama` was not sent: it is {kind}, where Ollama "
            "reads an object of model parameters; the request's own were sent",
        )
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.OPTIONS


@pytest.mark.parametrize("stream", [False, True])
def test_the_body_options_stream_is_not_sent(stream: bool) -> None:
    """Whether the answer comes whole or streamed is the call's, which reads it one way
    only: the option's `stream` would make `chat` read NDJSON as one JSON body."""
    theirs = not stream
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_option_json("ollama", {"stream": theirs, "keep_alive": "5m"})
    )
    _, _, body, warnings = encode(request, stream=stream)
    assert body["stream"] is stream and body["keep_alive"] == "5m"
    read = "a stream" if stream else "one whole response"
    assert [(w.subject, w.kind, w.message) for w in warnings] == [
        (
            FieldSubject(field=RequestField.OPTIONS),
            WarningKind.UNSUPPORTED,
            f"`stream` of the body option `ollama` ({json.dumps(theirs)}) was not sent: this "
            f"call reads {read}, so `stream: {json.dumps(stream)}` was sent (`chat_stream` "
            "streams, `chat` does not)",
        )
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR), stream=stream)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    # The call's own value is no change: nothing to say.
    same = ChatRequest(MODEL).user("Hi").with_option_json("ollama", {"stream": stream})
    _, _, body, warnings = encode(same, stream=stream)
    assert body["stream"] is stream and warnings == []


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_too_long_for_the_context_is_not_cut(stream: bool) -> None:
    """Ollama reads a missing `truncate` as true: it drops the oldest messages, or cuts the
    prompt, to fit `num_ctx`, and answers 200. `truncate: false` makes that an error; a body
    option's own `truncate` is the caller's choice, sent without a word."""
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi"), stream=stream)
    assert body["truncate"] is False and warnings == []
    theirs = ChatRequest(MODEL).user("Hi").with_option_json("ollama", {"truncate": True})
    _, _, body, warnings = encode(theirs, stream=stream)
    assert body["truncate"] is True and warnings == []


@pytest.mark.parametrize("seed", [-1, 2**32 - 1, 2**32 + 5, 2**53 + 1, 2**64])
def test_a_seed_ollama_would_not_keep_is_left_out(seed: int) -> None:
    """Ollama's runners read `seed` as 32 bits without a sign, their largest (which -1, Ollama's
    own "random", becomes) as a random seed: any other seed would be cut, or not be one. As on
    llama.cpp's server, it is left out with a warning, refused under `ERROR`."""
    request = ChatRequest(MODEL).user("Hi").with_temperature(0).with_seed(seed)
    _, _, body, warnings = encode(request)
    assert body["options"] == {"temperature": 0}
    assert [(w.subject, w.kind, w.message) for w in warnings] == [
        (
            FieldSubject(field=RequestField.SEED),
            WarningKind.UNSUPPORTED,
            "Ollama reads a seed as 32 bits without a sign, and 4294967295 (which -1 becomes) "
            f"as a random seed: it takes 0 to 4294967294; {seed} was left out",
        )
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.SEED


@pytest.mark.parametrize("seed", [0, 42, 2**32 - 2])
def test_a_seed_of_32_bits_goes_as_it_is(seed: int) -> None:
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_seed(seed))
    assert body["options"] == {"seed": seed} and warnings == []


@pytest.mark.parametrize(
    ("model", "effort", "think", "warned"),
    [
        (MODEL, None, None, []),
        (MODEL, "none", False, []),
        (MODEL, "low", True, [("reasoning_effort", "approximated")]),
        ("qwen3:8b", "high", True, [("reasoning_effort", "approximated")]),
        ("gpt-oss:20b", "none", "low", [("reasoning_effort", "unsupported")]),
        ("gpt-oss:20b", "minimal", "low", [("reasoning_effort", "approximated")]),
        ("gpt-oss:20b", "low", "low", []),
        ("gpt-oss:20b", "medium", "medium", []),
        ("hf.co/unsloth/gpt-oss-20b-GGUF:Q4_K_M", "high", "high", []),
        ("gpt-oss:120b-cloud", "high", "high", []),
    ],
)
def test_think_from_the_reasoning_effort(
    model: str, effort: str | None, think: bool | str | None, warned: list[tuple[str, str]]
) -> None:
    request = ChatRequest(model).user("Hi")
    if effort is not None:
        request = request.with_reasoning_effort(effort)  # type: ignore[arg-type]
    _, _, body, warnings = encode(request)
    assert body.get("think") == think
    assert ("think" in body) is (think is not None)
    assert fields(warnings) == warned


# Structured output


def test_json_mode_and_text() -> None:
    _, _, body, warnings = encode(
        ChatRequest(MODEL).user("Hi").with_response_format(ResponseFormat.json_object())
    )
    assert body["format"] == "json" and warnings == []
    _, _, body, warnings = encode(
        ChatRequest(MODEL).user("Hi").with_response_format(ResponseFormat.text())
    )
    assert "format" not in body and warnings == []


def test_a_schema_goes_in_format_through_llama_cpps_converter() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": r"^[A-Z]{2}-[0-9]{3}$"},
            "email": {"type": "string", "format": "email"},
            "price": {"type": "number", "minimum": 0},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["code", "email", "price", "age", "tags", "counts"],
    }
    fmt = ResponseFormat.for_schema(schema, name="item")
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_response_format(fmt))
    sent = body["format"]
    # What llama.cpp's converter compiles goes as written; an integer gets both bounds (alone,
    # one lets at most 16 digits through).
    int64 = 2**63 - 2
    assert sent["properties"]["code"] == {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}
    assert sent["properties"]["age"] == {"type": "integer", "minimum": 0, "maximum": int64}
    assert sent["properties"]["counts"] == {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": -int64, "maximum": int64},
    }
    assert sent["required"] == schema["required"]
    assert {w.kind for w in warnings} == {WarningKind.APPROXIMATED}
    assert {str(getattr(w.subject, "field", "")) for w in warnings} == {"response_format"}
    messages = [w.message for w in warnings]
    for found in (
        "`format` `email` is not enforced by the grammar at `/properties/email`",
        "`minimum` is not enforced by the grammar at `/properties/price` (only integers)",
        "`uniqueItems` is not enforced by the grammar at `/properties/tags`",
        "the schema at `/` is compiled by Ollama's llama.cpp grammar converter, which does not "
        "report which keywords it enforces",
    ):
        assert any(found in message for message in messages), found
    assert all(m.startswith("the response format `item` was approximated: ") for m in messages)


def test_a_schema_without_losses_is_still_approximate() -> None:
    fmt = ResponseFormat.for_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_response_format(fmt))
    assert body["format"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert fields(warnings) == [("response_format", "approximated")]


def test_an_unreadable_schema_is_an_invalid_request() -> None:
    fmt = ResponseFormat.for_schema({"type": "object", "properties": {"a": {"type": 7}}})
    with pytest.raises(InvalidRequestError, match="a schema allama cannot read"):
        encode(ChatRequest(MODEL).user("Hi").with_response_format(fmt))


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_a_schema_the_grammar_cannot_hold_goes_as_json_mode(
    monkeypatch: pytest.MonkeyPatch, policy: UnsupportedPolicy
) -> None:
    """No schema reaches this today (the converter holds every one allama can read), but a
    rewrite that says "cannot enforce" must not be sent as if it were enforced."""
    note = SchemaNote(WarningKind.UNSUPPORTED, "/x", "the subschema at `/x` is impossible")
    monkeypatch.setattr(_encode, "_rewrite", lambda schema, display: Rewrite(schema, (note,)))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"never-seen-before-7f3a": {"type": "string"}},
    }
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(schema))
        .with_unsupported_policy(policy)
    )
    if policy is UnsupportedPolicy.ERROR:
        with pytest.raises(UnsupportedError, match="impossible"):
            encode(request)
        return
    _, _, body, warnings = encode(request)
    assert body["format"] == "json"
    assert fields(warnings) == [("response_format", "unsupported")]
    assert 'sent as `format: "json"`' in warnings[0].message


@pytest.mark.parametrize("model", ["gpt-oss:120b-cloud", "kimi-k2:1t-cloud", "minimax-m2:cloud"])
def test_cloud_models_do_not_apply_format(model: str) -> None:
    fmt = ResponseFormat.for_schema(PERSON)
    _, _, body, warnings = encode(ChatRequest(model).user("Hi").with_response_format(fmt))
    assert "format" not in body
    assert fields(warnings) == [("response_format", "unsupported")]
    target = allama.provider("ollama")
    assert target.chat_capability(model, ChatCapability.STRUCTURED_OUTPUT) is (
        CapabilitySupport.UNSUPPORTED
    )


@pytest.mark.parametrize(
    ("base_url", "host"),
    [
        ("https://ollama.com", None),
        ("https://ollama.com/api", None),
        ("https://www.ollama.com/", None),
        ("https://ollama.com:443", None),
        (None, "ollama.com"),
    ],
)
@pytest.mark.parametrize("model", ["gpt-oss:120b", "deepseek-v3.1:671b", "gpt-oss:120b-cloud"])
def test_ollamas_cloud_api_applies_no_format_whatever_the_models_name(
    monkeypatch: pytest.MonkeyPatch, base_url: str | None, host: str | None, model: str
) -> None:
    """Ollama's cloud API (https://ollama.com/api/chat) names its models without `-cloud`
    (`gpt-oss:120b`), and its cloud has no structured outputs: every model there is a
    cloud model's family."""
    if host is not None:
        monkeypatch.setenv("OLLAMA_HOST", host)
    options = {"base_url": base_url} if base_url is not None else {}
    fmt = ResponseFormat.for_schema(PERSON)
    url, _, body, warnings = encode(
        ChatRequest(model).user("Hi").with_response_format(fmt), **options
    )
    assert url.endswith("ollama.com/api/chat") or url == "https://ollama.com:443/api/chat"
    assert "format" not in body
    assert [(str(w.kind), w.message) for w in warnings] == [
        (
            "unsupported",
            f"`{model}` on Ollama does not apply `format` (it runs on Ollama's cloud, which has "
            "no structured outputs); the output is unconstrained",
        )
    ]
    target = allama.provider("ollama", **options)
    assert target.chat_capability(model, ChatCapability.STRUCTURED_OUTPUT) is (
        CapabilitySupport.UNSUPPORTED
    )
    # The rest of the family is what it is anywhere: gpt-oss thinks at a level.
    if model.startswith("gpt-oss"):
        assert target.chat_capability(model, ChatCapability.REASONING) is (
            CapabilitySupport.SUPPORTED
        )
        request = ChatRequest(model).user("Hi").with_reasoning_effort("high")
        assert encode(request, **options)[2]["think"] == "high"
    with pytest.raises(ModeUnsupportedError):
        Extractor().plan(target, _Strings, ChatRequest(model).user("x"))


def test_only_ollama_com_and_the_hosts_under_it_are_the_cloud() -> None:
    fmt = ResponseFormat.for_schema(PERSON)
    request = ChatRequest("gpt-oss:120b").user("Hi").with_response_format(fmt)
    for base_url, cloud in (
        ("https://api.ollama.com", True),
        ("https://Ollama.com", True),
        ("HTTPS://OLLAMA.COM:443/api", True),
        ("https://box.example/Ollama.com", False),
        ("https://notollama.com", False),
        ("https://ollama.com.example.net", False),
        ("https://gateway.example/ollama.com", False),
        ("http://box:11434", False),
    ):
        _, _, body, _ = encode(request, base_url=base_url)
        assert ("format" in body) is not cloud, base_url
        target = allama.provider("ollama", base_url=base_url)
        assert target.chat_capability("gpt-oss:120b", ChatCapability.STRUCTURED_OUTPUT) is (
            CapabilitySupport.UNSUPPORTED if cloud else CapabilitySupport.SUPPORTED
        )


# Tools


def test_tools_go_as_functions_and_strict_is_not_enforced() -> None:
    tools = [
        ToolDefinition(name="person", parameters=PERSON, description="A person", strict=True),
        ToolDefinition(name="noop"),
    ]
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools(tools))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "person", "description": "A person", "parameters": PERSON},
        },
        {
            "type": "function",
            "function": {"name": "noop", "parameters": {"type": "object"}},
        },
    ]
    assert fields(warnings) == [("tools", "unsupported")]
    assert "tool `person` was sent without `strict`" in warnings[0].message


@pytest.mark.parametrize("choice", [ToolChoice.required(), ToolChoice.tool("person")])
def test_a_forced_tool_cannot_be_expressed(choice: ToolChoice) -> None:
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_tools([ToolDefinition(name="person", parameters=PERSON)])
        .with_tool_choice(choice)
    )
    _, _, body, warnings = encode(request)
    # Offered, not forced: the model chooses.
    assert [tool["function"]["name"] for tool in body["tools"]] == ["person"]
    assert "tool_choice" not in body
    assert fields(warnings) == [("tool_choice", "unsupported")]
    assert "cannot force a tool call" in warnings[0].message
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.TOOL_CHOICE
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING


def test_tool_choice_none_offers_no_tools_and_parallel_calls_have_no_setting() -> None:
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_tools([ToolDefinition(name="person", parameters=PERSON, strict=True)])
        .with_tool_choice(ToolChoice.none())
    )
    _, _, body, warnings = encode(request)
    assert "tools" not in body and warnings == []
    _, _, body, warnings = encode(
        request.with_tool_choice(ToolChoice.auto()).with_parallel_tool_calls(False)
    )
    assert len(body["tools"]) == 1
    assert fields(warnings) == [("parallel_tool_calls", "unsupported"), ("tools", "unsupported")]


def test_tool_choice_none_offers_no_tools_on_the_openai_compatible_endpoint_too() -> None:
    # Its `/v1` ignores `tool_choice`: the tools were sent, with a warning, and could be
    # called. Left out, none can be, as on the native API.
    target: HttpProvider = allama.provider("ollama-openai")
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_tools([ToolDefinition(name="person", parameters=PERSON)])
        .with_tool_choice(ToolChoice.none())
    )
    http, warnings = target._prepare(request, stream=False)
    assert "tools" not in http.body and "tool_choice" not in http.body
    assert warnings == []
    http, warnings = target._prepare(request.with_tool_choice(ToolChoice.required()), stream=False)
    assert [t["function"]["name"] for t in http.body["tools"]] == ["person"]
    assert fields(warnings) == [("tool_choice", "unsupported")]


class _Address(BaseModel):
    street: str
    city: str


class _Tree(BaseModel):
    name: str
    left: _Tree | None = None
    kids: list[_Tree] = []


class _Save(BaseModel):
    address: _Address = Field(description="where to send it")
    other: _Address | None = None
    many: list[_Address]
    tree: _Tree


ADDRESS_SENT: dict[str, Any] = {
    "properties": {
        "street": {"title": "Street", "type": "string"},
        "city": {"title": "City", "type": "string"},
    },
    "required": ["street", "city"],
    "title": "_Address",
    "type": "object",
}


def test_nested_models_in_tool_parameters_are_inlined() -> None:
    """Ollama decodes each property into a struct with no `$ref`: a property that is a
    nested model (`$ref`, also as a branch of `anyOf`) would reach the model as any value.
    Each goes inlined; the root's `$defs` stay for the `$ref` a recursion leaves, which is
    said where Ollama drops it (not under `items`, which Ollama keeps as written)."""
    schema = _Save.model_json_schema()
    given = json.loads(json.dumps(schema))
    tool = ToolDefinition(name="save", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    parameters = body["tools"][0]["function"]["parameters"]
    assert parameters["$defs"] == schema["$defs"]
    properties = parameters["properties"]
    assert properties["address"] == {**ADDRESS_SENT, "description": "where to send it"}
    assert properties["other"] == {
        "anyOf": [ADDRESS_SENT, {"type": "null"}],
        "default": None,
    }
    assert properties["many"] == {
        "items": ADDRESS_SENT,
        "title": "Many",
        "type": "array",
    }
    tree = properties["tree"]
    assert tree["title"] == "_Tree" and tree["required"] == ["name"]
    # The recursion is cut where it comes round again.
    assert tree["properties"]["left"] == {
        "anyOf": [{"$ref": "#/$defs/_Tree"}, {"type": "null"}],
        "default": None,
    }
    assert tree["properties"]["kids"]["items"] == {"$ref": "#/$defs/_Tree"}
    assert [(w.subject, w.kind, w.message) for w in warnings] == [
        (
            FieldSubject(field=RequestField.TOOLS),
            WarningKind.APPROXIMATED,
            "tool `save`: the recursion at `/properties/tree/properties/left/anyOf/0` was cut, "
            "and Ollama drops the `$ref` there: the arguments below it are not described to "
            "the model",
        )
    ]
    assert schema == given  # the caller's schema is left as it was
    # Nothing to inline: the parameters go as they are, without a word.
    _, _, body, warnings = encode(
        ChatRequest(MODEL).user("Hi").with_tools([ToolDefinition(name="p", parameters=PERSON)])
    )
    assert body["tools"][0]["function"]["parameters"] == PERSON and warnings == []


def test_a_ref_the_inliner_leaves_is_said_where_ollama_drops_it() -> None:
    """A `$ref` beside an assertion reads the target and the assertion together: merging
    them could change what the schema accepts, so it stays, and the caller is told."""
    schema: dict[str, Any] = {
        "$defs": {"Name": {"type": "string"}},
        "type": "object",
        "properties": {
            "name": {"$ref": "#/$defs/Name", "maxLength": 5},
            "alias": {"$ref": "#/$defs/Name"},
        },
    }
    tool = ToolDefinition(name="who", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    assert body["tools"][0]["function"]["parameters"]["properties"] == {
        "name": {"$ref": "#/$defs/Name", "maxLength": 5},
        "alias": {"type": "string"},
    }
    assert [w.message for w in warnings] == [
        "tool `who`: the `$ref` at `/properties/name` was not inlined: that would change what "
        "the schema accepts, and Ollama drops the `$ref` there: the arguments below it are "
        "not described to the model"
    ]


class _Cat(BaseModel):
    kind: Literal["cat"]
    meows: int


class _Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class _Adopt(BaseModel):
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")]
    mode: Literal["fast"] = "fast"
    pets: list[Annotated[_Cat | _Dog, Field(discriminator="kind")]] = []


def _kind(value: str) -> dict[str, Any]:
    return {"enum": [value], "title": "Kind", "type": "string"}


def test_one_of_and_const_go_as_the_keywords_ollama_keeps() -> None:
    """Ollama's property struct has no `oneOf` and no `const`: a discriminated union would
    reach the model with no type and no fields, a `Literal` of one value as any string. They
    go as `anyOf` and a one-value `enum`, at every depth Ollama reads (under `items`, which it
    keeps as written, they stay); the `discriminator` Ollama drops says nothing `anyOf` does
    not."""
    schema = _Adopt.model_json_schema()
    tool = ToolDefinition(name="adopt", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    properties = body["tools"][0]["function"]["parameters"]["properties"]
    cat = {
        "properties": {"kind": _kind("cat"), "meows": {"title": "Meows", "type": "integer"}},
        "required": ["kind", "meows"],
        "title": "_Cat",
        "type": "object",
    }
    dog = {
        "properties": {"kind": _kind("dog"), "barks": {"title": "Barks", "type": "integer"}},
        "required": ["kind", "barks"],
        "title": "_Dog",
        "type": "object",
    }
    assert properties["pet"] == {
        "discriminator": schema["properties"]["pet"]["discriminator"],
        "anyOf": [cat, dog],
        "title": "Pet",
    }
    assert properties["mode"] == {
        "enum": ["fast"],
        "default": "fast",
        "title": "Mode",
        "type": "string",
    }
    # Under `items` Ollama keeps the schema as written: only its `$ref`s are inlined.
    assert "oneOf" in properties["pets"]["items"]
    assert warnings == []


def test_const_beside_enum_and_one_of_in_a_nested_property() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "outer": {
                "type": "object",
                "properties": {
                    "choice": {
                        "oneOf": [{"const": 1}, {"const": True}, {"type": "string"}],
                        "description": "one of them",
                    },
                    "level": {"enum": [1, 2, True], "const": 1},
                },
            }
        },
    }
    given = json.loads(json.dumps(schema))
    tool = ToolDefinition(name="set", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    outer = body["tools"][0]["function"]["parameters"]["properties"]["outer"]
    assert outer["properties"] == {
        "choice": {
            "anyOf": [{"enum": [1]}, {"enum": [True]}, {"type": "string"}],
            "description": "one of them",
        },
        # Beside an `enum`, the values both allow (JSON's `true` is not `1`).
        "level": {"enum": [1]},
    }
    assert warnings == [] and schema == given


def test_a_lone_all_of_beside_annotations_is_merged() -> None:
    """Older pydantic writes a nested model with a description as `allOf: [{"$ref": ...}]`
    beside it; Ollama drops `allOf` whole. One schema beside nothing but annotations is
    merged into its node, the node's annotations over the schema's."""
    schema: dict[str, Any] = {
        "definitions": {"Address": {**ADDRESS_SENT, "title": "Address"}},
        "type": "object",
        "properties": {
            "address": {
                "title": "Where",
                "description": "where to send it",
                "allOf": [{"$ref": "#/definitions/Address"}],
            },
            "kind": {"allOf": [{"const": "home"}]},
        },
        "required": ["address"],
    }
    tool = ToolDefinition(name="send", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    properties = body["tools"][0]["function"]["parameters"]["properties"]
    assert properties["address"] == {
        "title": "Where",
        "description": "where to send it",
        "properties": ADDRESS_SENT["properties"],
        "required": ["street", "city"],
        "type": "object",
    }
    assert properties["kind"] == {"enum": ["home"]}
    assert warnings == []


def test_an_all_of_ollama_drops_and_a_one_of_beside_an_any_of_are_said() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "both": {"allOf": [{"type": "string"}, {"maxLength": 5}]},
            "beside": {"type": "string", "allOf": [{"minLength": 1}]},
            "union": {"anyOf": [{"type": "string"}], "oneOf": [{"type": "integer"}]},
        },
    }
    tool = ToolDefinition(name="t", parameters=schema)
    _, _, body, warnings = encode(ChatRequest(MODEL).user("Hi").with_tools([tool]))
    assert body["tools"][0]["function"]["parameters"] == schema
    assert [(w.subject, w.kind) for w in warnings] == [
        (FieldSubject(field=RequestField.TOOLS), WarningKind.APPROXIMATED)
    ] * 3
    assert [w.message for w in warnings] == [
        "tool `t`: the `allOf` at `/properties/both` could not be merged into one schema, and "
        "Ollama drops the `allOf` there: the arguments below it are not described to the model",
        "tool `t`: the `allOf` at `/properties/beside` could not be merged into one schema, "
        "and Ollama drops the `allOf` there: the arguments below it are not described to the "
        "model",
        "tool `t`: the `oneOf` at `/properties/union` stands beside an `anyOf`, and Ollama "
        "drops the `oneOf` there: the arguments below it are not described to the model",
    ]


# What the capability table answers, and what extraction plans from it


def test_capability_answers() -> None:
    target = allama.provider("ollama")

    def ask(model: str, capability: ChatCapability) -> CapabilitySupport:
        return target.chat_capability(model, capability)

    S, N, U = (
        CapabilitySupport.SUPPORTED,
        CapabilitySupport.UNSUPPORTED,
        CapabilitySupport.UNKNOWN,
    )
    for model in (MODEL, "qwen3:8b", "gpt-oss:20b", "gpt-oss:120b-cloud"):
        assert ask(model, ChatCapability.FORCED_TOOL_CHOICE) is N
        assert ask(model, ChatCapability.STREAMING) is S
        assert ask(model, ChatCapability.RESPONSE_SCHEMA_ANY_ROOT) is S
        assert ask(model, ChatCapability.TOOL_SCHEMA_ANY_ROOT) is N
    assert ask(MODEL, ChatCapability.STRUCTURED_OUTPUT) is S
    assert ask(MODEL, ChatCapability.TOOL_CALLS) is U
    assert ask(MODEL, ChatCapability.REASONING) is U
    assert ask(MODEL, ChatCapability.IMAGE_INPUT) is U
    assert ask("gpt-oss:20b", ChatCapability.REASONING) is S
    assert ask("gpt-oss:20b", ChatCapability.TOOL_CALLS) is S
    assert ask("library/GPT-OSS:20b", ChatCapability.REASONING) is S


class _Strings(BaseModel):
    name: str


class _Unsigned(BaseModel):
    count: int = Field(ge=0)


class _Map(BaseModel):
    counts: dict[str, int]


def _planned(model: str, mode: ExtractionMode, policy: UnsupportedPolicy) -> tuple[str, ...]:
    out = []
    for tp in (_Strings, _Unsigned, _Map):
        request = ChatRequest(model).user("x").with_option(mode).with_unsupported_policy(policy)
        try:
            plan = Extractor().plan(allama.provider("ollama"), tp, request)
        except UnsupportedError as error:
            assert error.stage is UnsupportedStage.BEFORE_SENDING
            out.append("refused")
            continue
        assert plan.mode is mode
        out.append(plan.enforcement.value)
    return tuple(out)


def test_enforcement_per_mode_for_the_seed_types() -> None:
    """Seed 000's table: Ollama native approximate / approximate / approximate; forced tool
    refused. Under `UnsupportedPolicy.WARN` the forced tool goes out offered but not forced,
    which the seed's own rule reports as not enforced (as for `ollama-openai`); under
    `ERROR` it is refused, as in the seed. Automatic extraction picks native."""
    warn, error = UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR
    assert _planned(MODEL, ExtractionMode.NATIVE, warn) == ("approximate",) * 3
    assert _planned(MODEL, ExtractionMode.NATIVE, error) == ("approximate",) * 3
    assert _planned(MODEL, ExtractionMode.FORCED_TOOL, warn) == ("not_enforced",) * 3
    assert _planned(MODEL, ExtractionMode.FORCED_TOOL, error) == ("refused",) * 3
    plan = Extractor().plan(allama.provider("ollama"), _Map, ChatRequest(MODEL).user("x"))
    assert plan.mode is ExtractionMode.NATIVE
    assert plan.enforcement.value == "approximate"


@pytest.mark.parametrize("preset", ["ollama", "ollama-openai"])
def test_tool_choice_none_beside_the_body_options_own_tools_is_said(preset: str) -> None:
    # Those are sent as given: with no `tool_choice` to send, the model may call them.
    namespace = "ollama" if preset == "ollama" else "openai_compat"
    own = [{"type": "function", "function": {"name": "srv", "parameters": {"type": "object"}}}]
    target: HttpProvider = allama.provider(preset)
    request = (
        ChatRequest(MODEL)
        .user("Hi")
        .with_option_json(namespace, {"tools": own})
        .with_tool_choice(ToolChoice.none())
    )
    http, warnings = target._prepare(request, stream=False)
    assert [t["function"]["name"] for t in http.body["tools"]] == ["srv"]
    assert fields(warnings) == [("tool_choice", "unsupported")]
