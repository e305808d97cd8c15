"""What the OpenAI family (Chat Completions presets and the Responses API) is sent of the
caller's input, where it was sent as given and answered 400: an image on Ollama's endpoint
in the data URL forms alone it reads, a call of blank arguments as `{}`, a text document
that cannot be read refused before sending, and the `$schema` and `$id` Mistral cannot
compile left out of a schema's root."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import allama
from allama import ChatRequest, ToolDefinition
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import (
    DocumentPart,
    ImagePart,
    RequestField,
    ResponseFormat,
    ToolCall,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\xfb\xff\xbe\x01"
PNG_B64 = base64.b64encode(PNG).decode("ascii")


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def encode(request: ChatRequest, preset: str) -> tuple[dict[str, Any], list[Warning]]:
    if preset == "openai-responses":
        target = allama.provider("openai", api="responses", api_key="k")
    else:
        target = allama.provider(preset, api_key="k")
    http, warnings = target._prepare(request, stream=False)
    return http.body, list(warnings)


# Images on Ollama's OpenAI-compatible endpoint


def ollama_image_url(part: ImagePart) -> str:
    body, warnings = encode(ChatRequest("llava").user("x", part), "ollama-openai")
    assert warnings == []
    wire = body["messages"][0]["content"][1]
    assert wire["type"] == "image_url"
    url = wire["image_url"]["url"]
    assert isinstance(url, str)
    return url


@pytest.mark.parametrize(
    ("part", "url"),
    [
        (ImagePart(data=PNG, media_type="image/png"), f"data:image/png;base64,{PNG_B64}"),
        (ImagePart(data=PNG, media_type="Image/PNG"), f"data:image/png;base64,{PNG_B64}"),
        (ImagePart(data=PNG, media_type="image/jpg"), f"data:image/jpg;base64,{PNG_B64}"),
        (ImagePart(data=PNG, media_type="image/webp"), f"data:image/webp;base64,{PNG_B64}"),
        (
            ImagePart(url=f"data:image/png;name=a.png;base64,{PNG_B64}"),
            f"data:image/png;base64,{PNG_B64}",
        ),
        # Types Ollama's endpoint does not name: the bytes alone, which it reads as `images`.
        (ImagePart(data=PNG, media_type="image/gif"), f"data:;base64,{PNG_B64}"),
        (ImagePart(url=f"data:image/gif;base64,{PNG_B64}"), f"data:;base64,{PNG_B64}"),
        (ImagePart(url=f"data:;base64,{PNG_B64}"), f"data:;base64,{PNG_B64}"),
        (
            ImagePart(url=f"data:image/png;base64,{base64.urlsafe_b64encode(PNG).decode()}"),
            f"data:image/png;base64,{PNG_B64}",  # in the standard alphabet Ollama reads
        ),
    ],
)
def test_ollama_openai_gets_images_in_the_data_url_forms_it_reads(
    part: ImagePart, url: str
) -> None:
    """Ollama's `decodeImageURL` takes `data:image/{jpeg,jpg,png,webp};base64,` or
    `data:;base64,` alone, and answers 400 "invalid image input" to any other start."""
    assert ollama_image_url(part) == url


@pytest.mark.parametrize("url", ["https://example.com/a.png", "http://localhost:8000/a.png"])
def test_ollama_openai_leaves_out_an_image_by_url(url: str) -> None:
    """Ollama's `decodeImageURL` answers 400 "image URLs are not currently supported, please
    use base64 encoded data instead" to an http(s) URL."""
    request = ChatRequest("llava").user("x", ImagePart(url=url))
    body, warnings = encode(request, "ollama-openai")
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert [(w.kind, w.subject.field, w.message) for w in warnings] == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.IMAGES,
            "Ollama's OpenAI-compatible endpoint takes images only as their bytes, not by "
            "URL; the image was left out",
        )
    ]
    with pytest.raises(UnsupportedError) as refused:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR), "ollama-openai")
    assert refused.value.field is RequestField.IMAGES
    # Elsewhere the URL goes as given.
    body, warnings = encode(ChatRequest("gpt-4.1").user("x", ImagePart(url=url)), "openai")
    assert body["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
    assert warnings == []


def test_other_presets_keep_an_images_own_type() -> None:
    body, _ = encode(
        ChatRequest("gpt-4.1").user("x", ImagePart(data=PNG, media_type="Image/GIF")), "openai"
    )
    url = body["messages"][0]["content"][1]["image_url"]["url"]
    assert url == f"data:image/gif;base64,{PNG_B64}"


# Calls of blank arguments


def blank_call(arguments: str, model: str) -> ChatRequest:
    call = ToolCall(id="call_abc", name="now", arguments=arguments)
    tool = ToolDefinition(name="now", parameters={"type": "object", "properties": {}})
    request = ChatRequest(model).with_tools([tool]).user("Time?").assistant([call])
    return request.tool_result(call, "12:00")


@pytest.mark.parametrize("preset", ["openai", "ollama-openai", "groq", "openrouter"])
@pytest.mark.parametrize("arguments", ["", " \n\t"])
def test_blank_arguments_go_back_to_chat_completions_as_an_empty_object(
    preset: str, arguments: str
) -> None:
    """`arguments` is JSON text of an object: Ollama's `json.Unmarshal("")` answers 400."""
    body, warnings = encode(blank_call(arguments, "gpt-4.1"), preset)
    assert body["messages"][1]["tool_calls"] == [
        {"id": "call_abc", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    ]
    assert warnings == []


@pytest.mark.parametrize("arguments", ["", " \n\t"])
def test_blank_arguments_go_back_to_the_responses_api_as_an_empty_object(arguments: str) -> None:
    body, warnings = encode(blank_call(arguments, "gpt-4.1"), "openai-responses")
    assert body["input"][1] == {
        "type": "function_call",
        "call_id": "call_abc",
        "name": "now",
        "arguments": "{}",
    }
    assert warnings == []


def test_arguments_that_are_not_blank_go_back_as_written() -> None:
    request = blank_call(' {"tz": "UTC"} ', "gpt-4.1")
    chat, _ = encode(request, "openai")
    responses, _ = encode(request, "openai-responses")
    assert chat["messages"][1]["tool_calls"][0]["function"]["arguments"] == ' {"tz": "UTC"} '
    assert responses["input"][1]["arguments"] == ' {"tz": "UTC"} '


# Text documents that cannot be read


@pytest.mark.parametrize("preset", ["openai", "openai-responses"])
@pytest.mark.parametrize(
    ("document", "why"),
    [
        (
            DocumentPart(data=b"hello", media_type="text/plain; charset=undefined"),
            "a text/plain document names charset undefined, which allama cannot read",
        ),
        (
            DocumentPart(url="data:text/plain;charset=idna,hello"),
            "a text/plain document names charset idna, which allama cannot read",
        ),
        (
            DocumentPart(data=b"hello", media_type="text/plain; charset=no-such-charset"),
            "a text/plain document names charset no-such-charset, which allama cannot read",
        ),
        (
            DocumentPart(data=b"caf\xe9", media_type="text/plain"),
            "a text/plain document must be UTF-8 text",
        ),
        (
            DocumentPart(url="data:text/plain;charset=utf-16,%00"),
            "a text/plain document must be text in its charset (utf-16)",
        ),
    ],
)
def test_openai_refuses_a_text_document_it_cannot_read(
    preset: str, document: DocumentPart, why: str
) -> None:
    """As Anthropic, Gemini and Ollama refuse it, before sending: left out with a warning,
    the request was paid for without it."""
    with pytest.raises(InvalidRequestError) as raised:
        encode(ChatRequest("gpt-4.1").user("x", document), preset)
    assert str(raised.value) == why


def test_openai_still_leaves_out_a_document_it_has_no_place_for() -> None:
    document = DocumentPart(data=b"<p>x</p>", media_type="text/html")
    body, warnings = encode(ChatRequest("gpt-4.1").user("x", document), "openai")
    assert body["messages"][0]["content"] == [{"type": "text", "text": "x"}]
    assert [warning.message for warning in warnings] == [
        "Chat Completions takes PDF and plain-text documents, not text/html; it was left out"
    ]


def test_the_openai_form_refuses_a_part_it_cannot_read_as_such() -> None:
    """`to_openai_messages` says what is wrong with the part, not that the form has no
    place for it."""
    request = ChatRequest("m").user("x", ImagePart(url="data:image/png;base64,%%%"))
    with pytest.raises(ValueError) as raised:
        request.to_openai_messages()
    assert str(raised.value) == (
        "message 0 (user), part 1: the image's data URL holds no valid base64"
    )


# `$schema` and `$id` on Mistral

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:weather",
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
WITHOUT_IDS = {key: value for key, value in SCHEMA.items() if key not in ("$schema", "$id")}


@pytest.mark.parametrize("strict", [None, False])
def test_mistral_gets_a_tools_schema_without_schema_and_id(strict: bool | None) -> None:
    """Mistral answers 400 "failed to compile JSON schema" to them (litellm strips them)."""
    tool = ToolDefinition(name="weather", parameters=SCHEMA, strict=strict)
    request = ChatRequest("mistral-small-latest").with_tools([tool]).user("Rain?")
    body, warnings = encode(request, "mistral")
    function = body["tools"][0]["function"]
    assert function["parameters"] == WITHOUT_IDS
    assert [(warning.is_about(RequestField.TOOLS), warning.message) for warning in warnings] == [
        (
            True,
            "Mistral cannot compile a schema whose root holds `$schema` or `$id`; tool "
            "`weather` was sent without its `$schema` and `$id`",
        )
    ]


@pytest.mark.parametrize("strict", [None, False])
def test_mistral_gets_a_response_formats_schema_without_schema_and_id(
    strict: bool | None,
) -> None:
    fmt = ResponseFormat.for_schema(SCHEMA, name="w", strict=strict)
    request = ChatRequest("mistral-small-latest").user("Rain? Answer in JSON.")
    body, warnings = encode(request.with_response_format(fmt), "mistral")
    assert body["response_format"]["json_schema"]["schema"] == WITHOUT_IDS
    assert [warning.message for warning in warnings] == [
        "Mistral cannot compile a schema whose root holds `$schema` or `$id`; the response "
        "format `w` was sent without its `$schema` and `$id`"
    ]


def test_mistral_is_told_only_of_what_its_schema_held() -> None:
    tool = ToolDefinition(name="weather", parameters={**WITHOUT_IDS, "$schema": SCHEMA["$schema"]})
    body, warnings = encode(
        ChatRequest("mistral-small-latest").with_tools([tool]).user("Rain?"), "mistral"
    )
    assert body["tools"][0]["function"]["parameters"] == WITHOUT_IDS
    assert [warning.message for warning in warnings] == [
        "Mistral cannot compile a schema whose root holds `$schema` or `$id`; tool "
        "`weather` was sent without its `$schema`"
    ]


def test_other_presets_get_a_schema_that_is_not_strict_as_given() -> None:
    tool = ToolDefinition(name="weather", parameters=SCHEMA)
    body, warnings = encode(ChatRequest("gpt-4.1").with_tools([tool]).user("Rain?"), "openai")
    assert body["tools"][0]["function"]["parameters"] == SCHEMA
    assert warnings == []
