"""Mistakes a new user makes in the first hour, each refused where it is made with a message
that says what to write instead: a local path as an image's URL, text as a part's bytes,
OpenAI-style messages, a flag or text for a number, an instance for the type to extract, a
misspelt provider option."""

from __future__ import annotations

import base64
import dataclasses
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import allama
from allama import ChatRequest, DocumentPart, ImagePart, ToolCall
from allama.mock import MockProvider

PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 8

IMAGE_PATH = (
    "an image's `url` is a local path, which no provider can fetch: give a URL the provider "
    "can reach (https://..., data:...), or send the file's bytes, with "
    "`ImagePart.from_file(path)` or `ImagePart(data=Path(path).read_bytes(), "
    "media_type='image/png')`"
)


# 1. A local path as a URL


@pytest.mark.parametrize("url", ["/tmp/cat.png", "cat.png", "./cat.png", "C:\\cat.png", "C:/a.png"])
def test_a_local_path_as_an_images_url_is_refused_when_the_part_is_built(url: str) -> None:
    with pytest.raises(ValueError) as raised:
        ImagePart(url=url)
    assert str(raised.value) == IMAGE_PATH


def test_a_file_url_or_a_documents_path_is_refused_too() -> None:
    with pytest.raises(ValueError) as raised:
        ImagePart(url="file:///tmp/cat.png")
    assert str(raised.value) == IMAGE_PATH.replace("a local path", "a `file:` URL")
    with pytest.raises(ValueError) as raised:
        DocumentPart(url="invoice.pdf")
    assert str(raised.value) == (
        "a document's `url` is a local path, which no provider can fetch: give a URL the "
        "provider can reach (https://..., data:...), or send the file's bytes, with "
        "`DocumentPart.from_file(path)` or `DocumentPart(data=Path(path).read_bytes(), "
        "media_type='application/pdf')`"
    )
    # Read from JSON (a request kept by hand), it fails as it is read, not at a provider.
    kept = ChatRequest("m").user("x", ImagePart(url="https://x/cat.png")).to_json()
    with pytest.raises(ValidationError) as invalid:
        ChatRequest.from_json(kept.replace("https://x/cat.png", "/tmp/cat.png"))
    assert IMAGE_PATH in str(invalid.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "http://example.com/cat.png",
        "HTTPS://example.com/cat.png",
        "data:image/png;base64,iVBORw0KGgo=",
        "gs://bucket/cat.png",
        "s3://bucket/cat.png",
        "https://generativelanguage.googleapis.com/v1beta/files/abc",
    ],
)
def test_urls_a_provider_can_reach_are_kept(url: str) -> None:
    assert ImagePart(url=url).url == url
    assert DocumentPart(url=url).url == url


def test_from_file_reads_the_bytes_and_tells_the_media_type_by_the_name(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(PNG)
    (tmp_path / "invoice.pdf").write_bytes(b"%PDF-1.7")
    (tmp_path / "notes.txt").write_bytes(b"hello")
    (tmp_path / "blob").write_bytes(b"?")
    image = ImagePart.from_file(tmp_path / "cat.png")
    assert (image.data, image.media_type, image.url) == (PNG, "image/png", None)
    assert ImagePart.from_file(str(tmp_path / "cat.png")) == image
    document = DocumentPart.from_file(tmp_path / "invoice.pdf", title="Invoice")
    assert (document.data, document.media_type, document.title) == (
        b"%PDF-1.7",
        "application/pdf",
        "Invoice",
    )
    assert DocumentPart.from_file(tmp_path / "notes.txt").media_type == "text/plain"
    assert ImagePart.from_file(tmp_path / "blob", "image/webp").media_type == "image/webp"
    with pytest.raises(ValueError) as raised:
        ImagePart.from_file(tmp_path / "blob")
    assert str(raised.value) == (
        "ImagePart.from_file: the file's name does not tell its media type; give it, as in "
        "`ImagePart.from_file(path, media_type=...)`"
    )
    with pytest.raises(ValueError) as raised:
        ImagePart.from_file(tmp_path / "invoice.pdf")
    assert str(raised.value) == (
        "ImagePart.from_file: the file's name says application/pdf, which is not an image; "
        "use DocumentPart.from_file, or give the media type"
    )
    with pytest.raises(ValueError, match=r"which is not a document; use ImagePart\.from_file"):
        DocumentPart.from_file(tmp_path / "cat.png")


@pytest.mark.parametrize(
    ("name", "compression"),
    [("report.pdf.gz", "gzip"), ("cat.png.gz", "gzip"), ("cat.jpg.bz2", "bzip2")],
)
def test_a_compressed_file_is_refused_naming_it_and_its_compression(
    tmp_path: Path, name: str, compression: str
) -> None:
    """Its name says what it holds (`application/pdf`), which went as the type of the
    compressed bytes: the provider was sent gzip as a PDF."""
    (tmp_path / name).write_bytes(b"\x1f\x8b\x08\x00")
    for part in (ImagePart, DocumentPart):
        with pytest.raises(ValueError) as raised:
            part.from_file(tmp_path / name)
        assert str(raised.value) == (
            f"{part.__name__}.from_file: {name!r} is compressed ({compression}), which no "
            "provider reads: decompress it first"
        )
    # A media type given is the caller's word on the bytes, and is taken as it is.
    given = DocumentPart.from_file(tmp_path / name, media_type="application/gzip")
    assert given.media_type == "application/gzip"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("notes.md", "# Notes\n- one"),
        ("table.csv", "a,b\n1,2"),
        ("page.html", "<p>hi</p>"),
        ("data.json", '{"a": 1}'),
        ("feed.xml", "<a/>"),
        ("notes.txt", "plain"),
    ],
)
def test_a_text_file_is_read_as_plain_text_which_every_provider_takes(
    tmp_path: Path, name: str, text: str
) -> None:
    """Read as `text/markdown` (or `text/csv`, ...), the document was refused by Anthropic,
    OpenAI and Ollama, which take PDF and plain-text documents alone."""
    (tmp_path / name).write_text(text)
    document = DocumentPart.from_file(tmp_path / name, title="Notes")
    assert (document.data, document.media_type) == (text.encode(), "text/plain")
    request = ChatRequest("claude-sonnet-4-5").user("Sum it up.", document)
    http, warnings = allama.provider("anthropic", api_key="sk-ant-abcdefgh")._prepare(
        request, stream=False
    )
    assert http.body["messages"][0]["content"][1] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
        "title": "Notes",
    }
    assert warnings == []
    assert request.to_openai_messages()[0]["content"][1] == {"type": "text", "text": text}
    # A media type given is kept.
    kept = DocumentPart.from_file(tmp_path / name, media_type="text/markdown")
    assert kept.media_type == "text/markdown"


# 2. A str as a part's bytes


@pytest.mark.parametrize("text", ["INVOICE/2024/Total/1200", "hello world", "iVBORw0KGgo="])
def test_a_str_given_as_data_is_refused_not_read_as_base64(text: str) -> None:
    with pytest.raises(TypeError) as raised:
        DocumentPart(data=text, media_type="text/plain")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "DocumentPart: `data` must be bytes, not str: pass the file's bytes, with "
        "`DocumentPart.from_file(path)` or `DocumentPart(data=Path(path).read_bytes(), "
        "media_type='application/pdf')`; text: `data=text.encode()` with "
        "`media_type='text/plain'`, or a `TextPart` (base64 text: `base64.b64decode(text)`)"
    )
    with pytest.raises(TypeError) as raised:
        ImagePart(data=text, media_type="image/png")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "ImagePart: `data` must be bytes, not str: pass the file's bytes, with "
        "`ImagePart.from_file(path)` or `ImagePart(data=Path(path).read_bytes(), "
        "media_type='image/png')` (base64 text: `base64.b64decode(text)`)"
    )


def test_a_path_given_as_data_points_to_from_file() -> None:
    with pytest.raises(TypeError) as raised:
        ImagePart(data=Path("/tmp/cat.png"), media_type="image/png")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "ImagePart: `data` must be bytes, not a path: read an image's file with "
        "`ImagePart.from_file(path)`"
    )


def test_the_json_form_and_dicts_still_read_data_as_base64() -> None:
    request = ChatRequest("m").user(
        "Read these.",
        ImagePart(data=PNG, media_type="image/png"),
        DocumentPart(data=b"INVOICE 1200", media_type="text/plain", title="t"),
    )
    assert ChatRequest.from_json(request.to_json()) == request
    assert ChatRequest.model_validate(request.model_dump(mode="json")) == request
    assert ChatRequest.model_validate(request.model_dump()) == request
    encoded = base64.b64encode(PNG).decode()
    part = ImagePart.model_validate({"data": encoded, "media_type": "image/png"})
    assert part.data == PNG
    assert ImagePart.from_json(part.to_json()) == part
    opened = ChatRequest.from_openai(
        "m",
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
                ],
            }
        ],
    )
    assert opened.messages[0].content[0] == part  # type: ignore[union-attr]


# 3. OpenAI-style messages


@pytest.mark.parametrize(
    ("messages", "index"),
    [
        ([{"role": "user", "content": "hi"}], 0),
        ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], 1),
        ([{"role": "assistant", "content": None, "tool_calls": []}], 0),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}],
                }
            ],
            0,
        ),
    ],
)
def test_openai_style_messages_point_to_from_openai(messages: Any, index: int) -> None:
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", messages=messages)
    assert str(raised.value) == (
        f"ChatRequest: messages[{index}] is in OpenAI's Chat Completions form, which "
        "`messages=` does not read: use ChatRequest.from_openai(model, messages), or build "
        "the request with .system(), .user() and .assistant()"
    )


def test_the_json_form_of_messages_is_still_taken() -> None:
    messages: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"},
    ]
    request = ChatRequest("m", messages=messages)
    assert [message.role for message in request.messages] == ["system", "user", "tool"]
    assert ChatRequest.from_openai("m", [{"role": "user", "content": "hi"}]).messages == (
        ChatRequest("m").user("hi").messages
    )


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}],
        [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}],
        [{"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "42"}]}],
        [{"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}],
    ],
)
def test_text_parts_where_allama_takes_a_str_point_to_from_openai(messages: Any) -> None:
    """Valid OpenAI messages, which got pydantic's bare "Input should be a valid string"."""
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", messages=messages)
    assert str(raised.value) == (
        "ChatRequest: messages[0] is in OpenAI's Chat Completions form, which "
        "`messages=` does not read: use ChatRequest.from_openai(model, messages), or build "
        "the request with .system(), .user() and .assistant()"
    )
    assert len(ChatRequest.from_openai("m", messages).messages) == 1


class _Function(BaseModel):
    name: str
    arguments: str


class _ToolCall(BaseModel):
    id: str
    type: str = "function"
    function: _Function


class ChatCompletionMessage(BaseModel):
    """The OpenAI SDK's message of a response, as its fields are (the SDK is not installed
    here): a pydantic model whose unset fields are `None`."""

    role: str
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[_ToolCall] | None = None


def test_the_openai_sdks_message_objects_are_read_by_from_openai() -> None:
    answer = ChatCompletionMessage(
        role="assistant",
        tool_calls=[_ToolCall(id="c1", function=_Function(name="f", arguments="{}"))],
    )
    conversation: list[Any] = [{"role": "user", "content": "q"}, answer]
    request = ChatRequest.from_openai("m", conversation)
    expected = ChatRequest.from_openai("m", [conversation[0], answer.model_dump(exclude_none=True)])
    assert request == expected
    assert request.messages[1].content == (ToolCall(id="c1", name="f", arguments="{}"),)
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", messages=[*ChatRequest("m").user("q").messages, answer])  # type: ignore[list-item]
    assert str(raised.value) == (
        "ChatRequest: messages[1] is a ChatCompletionMessage, not one of allama's messages: "
        "for the OpenAI SDK's, use ChatRequest.from_openai(model, messages)"
    )
    # allama's own messages are no dicts of OpenAI's form, and are refused as before.
    with pytest.raises(TypeError) as wrong:
        ChatRequest.from_openai("m", ChatRequest("m").user("q").messages)  # type: ignore[arg-type]
    assert str(wrong.value) == "messages[0]: expected a message dict with a `role`, got UserMessage"


@pytest.mark.parametrize(
    "message",
    [
        {"type": "message", "role": "user", "content": "q"},
        {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    ],
)
def test_the_responses_apis_form_is_named_as_such(message: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", messages=[message])  # type: ignore[list-item]
    assert str(raised.value) == (
        "ChatRequest: messages[0] is in OpenAI's Responses form, which neither `messages=` "
        "nor ChatRequest.from_openai (Chat Completions messages) reads: build the request "
        "with .system(), .user() and .assistant()"
    )


# 4. A flag or a text for a number


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("temperature", "a number"),
        ("top_p", "a number"),
        ("max_output_tokens", "a whole number"),
        ("seed", "a whole number"),
        ("logprobs", "a whole number"),
    ],
)
def test_a_flag_or_text_for_a_numeric_setting_is_refused_naming_it(
    setting: str, expected: str
) -> None:
    settings: dict[str, Any] = {setting: True}
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", **settings)
    assert str(raised.value) == f"ChatRequest: `{setting}` must be {expected} or None, not bool"
    settings = {setting: "1"}
    with pytest.raises(ValueError) as raised:
        ChatRequest("m", **settings)
    assert str(raised.value) == (
        f"ChatRequest: `{setting}` must be {expected} or None, not str; "
        "write the number itself, not its text"
    )
    with pytest.raises(ValueError) as raised:
        ChatRequest("m")._with(**{setting: True})
    assert str(raised.value) == f"ChatRequest: `{setting}` must be {expected} or None, not bool"


def test_the_with_methods_refuse_them_too_and_numbers_are_kept() -> None:
    with pytest.raises(ValueError, match=r"^ChatRequest: `temperature` must be a number"):
        ChatRequest("m").with_temperature(True)
    with pytest.raises(ValueError, match=r"^ChatRequest: `max_output_tokens` must be a whole"):
        ChatRequest("m").with_max_output_tokens("5")  # type: ignore[arg-type]
    request = ChatRequest("m", temperature=1, top_p=1, max_output_tokens=5, seed=0, logprobs=0)
    assert (request.temperature, type(request.temperature)) == (1.0, float)
    assert ChatRequest.from_json(request.to_json()) == request
    with pytest.raises(ValidationError, match="`temperature` must be a number or None, not bool"):
        ChatRequest.from_json('{"model": "m", "temperature": true}')


@pytest.mark.parametrize("setting", ["temperature", "top_p", "max_output_tokens", "seed"])
def test_bytes_and_numpys_bool_for_a_number_are_refused(setting: str) -> None:
    """Pydantic parses bytes as it parses text (`b"0.5"` was 0.5) and reads numpy's bool as
    1: neither is a number given."""
    np = pytest.importorskip("numpy")
    expected = "a whole number" if setting in ("max_output_tokens", "seed") else "a number"
    for value, said in [
        (b"1", "bytes; write the number itself, not its text"),
        (np.bool_(True), "numpy.bool"),
    ]:
        with pytest.raises(ValueError) as raised:
            ChatRequest("m", **{setting: value})
        assert (
            str(raised.value) == f"ChatRequest: `{setting}` must be {expected} or None, not {said}"
        )
        with pytest.raises(ValueError) as raised:
            ChatRequest("m")._with(**{setting: value})
        assert (
            str(raised.value) == f"ChatRequest: `{setting}` must be {expected} or None, not {said}"
        )
    # numpy's numbers are numbers.
    assert getattr(ChatRequest("m", **{setting: np.int64(1)}), setting) == 1


def test_with_logprobs_takes_what_the_constructor_takes() -> None:
    np = pytest.importorskip("numpy")
    for top in (np.int64(5), 5.0, Decimal(5), 5):
        assert ChatRequest("m").with_logprobs(top).logprobs == 5  # type: ignore[arg-type]
        assert ChatRequest("m", logprobs=top).logprobs == 5  # type: ignore[arg-type]
    for refused in (np.bool_(True), True):
        with pytest.raises(ValueError) as raised:
            ChatRequest("m").with_logprobs(refused)
        name = "bool" if refused is True else "numpy.bool"
        assert str(raised.value) == (
            f"ChatRequest: `logprobs` must be a whole number or None, not {name}"
        )
    with pytest.raises(ValueError) as too_many:
        ChatRequest("m").with_logprobs(21)
    assert str(too_many.value) == "invalid `logprobs`: Input should be less than or equal to 20"
    assert ChatRequest("m").with_logprobs(None).logprobs is None
    assert ChatRequest("m").with_logprobs().logprobs == 0


# 5. An instance for the type to extract


class Program(BaseModel):
    author: str
    year: int


@dataclasses.dataclass
class Release:
    author: str
    year: int


@pytest.mark.parametrize(
    ("given", "name"),
    [
        (Program(author="SECRET-AUTHOR", year=1843), "Program"),
        (Release("SECRET-AUTHOR", 1), "Release"),
    ],
)
def test_an_instance_for_the_type_is_refused_without_its_values(given: Any, name: str) -> None:
    provider = MockProvider.with_text('{"author": "Ada", "year": 1843}')
    request = ChatRequest("m").user("Ada published the first program in 1843.")
    for run in (allama.extract, allama.extract_stream):
        with pytest.raises(TypeError) as raised:
            run(provider, given, request)
        assert str(raised.value) == (
            f"pass the class `{name}`, not an instance of it: the type to extract is the "
            "class itself"
        )
        assert "SECRET" not in str(raised.value)
    assert allama.extract(provider, Program, request).value == Program(author="Ada", year=1843)


# 6. A misspelt provider option


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("apikey", "did you mean 'api_key'?"),
        ("apiKey", "did you mean 'api_key'?"),
        ("api-key", "did you mean 'api_key'?"),
        ("baseurl", "did you mean 'base_url'?"),
        ("url", "did you mean 'base_url'?"),
        ("timout", "did you mean 'timeout'?"),
        ("max_retries", "retries are a wrapper's: allama.RetryingProvider(provider)"),
    ],
)
def test_an_unknown_provider_option_names_allama_provider_and_the_closest(
    option: str, hint: str
) -> None:
    options: dict[str, Any] = {option: "sk-secretsecret"}
    with pytest.raises(TypeError) as raised:
        allama.provider("openai", **options)
    assert str(raised.value) == f"allama.provider('openai') has no option {option!r}; {hint}"
    assert "secret" not in str(raised.value)


def test_an_unknown_option_with_no_likely_one_lists_them() -> None:
    with pytest.raises(TypeError) as raised:
        allama.provider("anthropic", colour="blue")  # type: ignore[call-overload]
    assert str(raised.value) == (
        "allama.provider('anthropic') has no option 'colour'; its options: access_token, "
        "account_id, api, api_key, api_version, base_url, capabilities, capture_content, "
        "chat_template, context, credentials, deadline, endpoint, engine, headers, location, "
        "model, parallel, project, threads, timeout, tracer_provider, transport"
    )
    with pytest.raises(TypeError, match=r"^allama.provider\('local'\) has no option 'apikey'"):
        allama.provider("local", apikey="k")  # type: ignore[call-overload]


# 7. OpenAI's forms of a response format, a tool and a tool choice

ENVELOPE_HINT = (
    "`json_schema` holds OpenAI's envelope ({'name': ..., 'strict': ..., 'schema': {...}}), "
    "not the JSON Schema itself: use ResponseFormat.for_schema(schema, name=..., strict=...), "
    "or read OpenAI's response_format with ChatRequest.from_openai(model, messages, "
    "response_format=...)"
)
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}}
OPENAI_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "person", "strict": True, "schema": PERSON},
}


def test_openais_json_schema_envelope_is_refused_not_taken_for_the_schema() -> None:
    """The envelope validated, `json_schema` being allama's field name too: OpenAI was sent
    a loose schema of the envelope, Gemini a schema of any JSON, silently."""
    with pytest.raises(ValidationError) as invalid:
        ChatRequest("m", response_format=OPENAI_FORMAT)  # type: ignore[arg-type]
    assert [(e["loc"], e["msg"]) for e in invalid.value.errors()] == [
        (("response_format",), f"Value error, {ENVELOPE_HINT}")
    ]
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_response_format(OPENAI_FORMAT)  # type: ignore[arg-type]
    assert str(raised.value) == f"invalid `response_format`: Value error, {ENVELOPE_HINT}"
    with pytest.raises(ValidationError) as invalid:
        allama.ResponseFormat.for_schema(OPENAI_FORMAT["json_schema"])
    assert invalid.value.errors()[0]["msg"] == f"Value error, {ENVELOPE_HINT}"
    # A schema that merely has a `name` property, or a `description`, is a schema.
    schema = {"type": "object", "properties": {"name": {}}, "description": "d"}
    assert allama.ResponseFormat.for_schema(schema).json_schema == schema


def test_openais_json_object_tool_and_tool_choice_point_to_allamas() -> None:
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_response_format({"type": "json_object"})  # type: ignore[arg-type]
    assert str(raised.value) == (
        "invalid `response_format`: Value error, OpenAI's response format `json_object` is "
        "allama's `json`: ResponseFormat.json_object()"
    )
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_tool_choice("required")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "invalid `tool_choice`: Value error, a tool choice is a ToolChoice, not OpenAI's "
        "string: ToolChoice.required()"
    )
    choice = {"type": "function", "function": {"name": "f"}}
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_tool_choice(choice)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "invalid `tool_choice`: Value error, this is OpenAI's tool choice form ({'type': "
        "'function', 'function': {'name': ...}}): use ToolChoice.tool(name), or read OpenAI's "
        "form with ChatRequest.from_openai(model, messages, tool_choice=...)"
    )
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(ValidationError) as invalid:
        ChatRequest("m", tools=[tool])  # type: ignore[list-item]
    assert [(e["loc"], e["msg"]) for e in invalid.value.errors()] == [
        (
            ("tools", 0),
            "Value error, this is OpenAI's tool form ({'type': 'function', 'function': {...}}): "
            "give its fields, ToolDefinition(name=..., parameters=..., description=..., "
            "strict=...), or read OpenAI's tools with "
            "ChatRequest.from_openai(model, messages, tools=...)",
        )
    ]


# 8. A provider's body option that is not an object


@pytest.mark.parametrize("namespace", ["anthropic", "gemini", "openai_compat"])
@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ('{"top_k": 40}', "not str; give the dict itself, not its JSON text"),
        ([{"top_k": 40}], "not list"),
        (None, "not NoneType; to remove it, without_option('{namespace}')"),
    ],
)
def test_a_body_option_that_is_no_object_is_refused_naming_its_namespace(
    namespace: str, value: Any, hint: str
) -> None:
    """The adapters merge a body option's fields into the body, and dropped anything else
    silently, under `UnsupportedPolicy.ERROR` too."""
    expected = (
        f"the option `{namespace}` holds fields for the request's body, so it must be a JSON "
        f"object (a dict), {hint.format(namespace=namespace)}"
    )
    with pytest.raises(TypeError) as raised:
        ChatRequest("m").with_option_json(namespace, value)
    assert str(raised.value) == expected
    with pytest.raises(ValidationError) as invalid:
        ChatRequest("m", options={namespace: value})
    assert invalid.value.errors()[0]["msg"] == f"Value error, {expected}"


def test_options_of_other_namespaces_may_be_any_json() -> None:
    request = ChatRequest("m").with_option_json("allama.decision.options", ["a", "b"])
    assert request.with_option_json("demo", "text").options == {
        "allama.decision.options": ["a", "b"],
        "demo": "text",
    }
    assert ChatRequest("m").with_option_json("anthropic", {"top_k": 40}).options == {
        "anthropic": {"top_k": 40}
    }


def test_the_body_namespaces_are_the_adapters() -> None:
    from allama.adapters.anthropic._encode import BODY_OPTION as ANTHROPIC
    from allama.adapters.gemini._encode import BODY_OPTION as GEMINI
    from allama.adapters.ollama._encode import BODY_OPTION as OLLAMA
    from allama.adapters.openai_compat._encode import BODY_OPTION as OPENAI_COMPAT
    from allama.adapters.openai_responses._encode import BODY_OPTION as OPENAI_RESPONSES
    from allama.types._request import _BODY_OPTIONS

    adapters = {ANTHROPIC, GEMINI, OLLAMA, OPENAI_COMPAT, OPENAI_RESPONSES}
    assert adapters == _BODY_OPTIONS


# 9. An image of no bytes, or of bytes that are no image


def test_an_image_of_no_bytes_or_no_image_type_is_refused_when_built() -> None:
    with pytest.raises(ValueError) as raised:
        ImagePart(data=b"", media_type="image/png")
    assert str(raised.value) == "an image's `data` is empty: give the image file's bytes"
    with pytest.raises(ValueError) as raised:
        ImagePart(data=PNG, media_type="text/plain")
    assert str(raised.value) == (
        "an image's `media_type` must be an image type (image/png, image/jpeg, ...), not "
        "text/plain: a PDF or a text goes in a DocumentPart"
    )
    with pytest.raises(ValueError) as raised:
        ImagePart(data=PNG, media_type="a PDF, I think")
    assert str(raised.value) == (
        "an image's `media_type` must be an image type (image/png, image/jpeg, ...): a PDF or "
        "a text goes in a DocumentPart"
    )
    # Read from JSON, refused as it is read.
    with pytest.raises(ValidationError) as invalid:
        ImagePart.model_validate_json('{"data": "", "media_type": "image/png"}')
    assert invalid.value.errors()[0]["msg"] == (
        "Value error, an image's `data` is empty: give the image file's bytes"
    )
    # Any image type is left to the provider's encoder to judge, in any case.
    assert ImagePart(data=PNG, media_type="IMAGE/HEIC").media_type == "IMAGE/HEIC"


def test_a_document_of_no_bytes_is_refused_when_built() -> None:
    with pytest.raises(ValidationError) as invalid:
        DocumentPart(data=b"", media_type="text/plain")
    assert invalid.value.errors()[0]["msg"] == (
        "Value error, a document's `data` is empty: give the document file's bytes"
    )
    with pytest.raises(ValidationError) as invalid:
        DocumentPart.model_validate_json('{"data": "", "media_type": "application/pdf"}')
    assert invalid.value.errors()[0]["msg"] == (
        "Value error, a document's `data` is empty: give the document file's bytes"
    )
    assert DocumentPart(data=b" ", media_type="text/plain").data == b" "


def test_a_tool_or_a_tool_choice_of_no_name_is_refused_when_built() -> None:
    with pytest.raises(ValidationError) as invalid:
        allama.ToolDefinition(name="")
    assert invalid.value.errors()[0]["msg"] == (
        "Value error, a tool needs a name: every provider refuses an empty one"
    )
    with pytest.raises(ValidationError) as invalid:
        allama.ToolChoice.tool("")
    assert invalid.value.errors()[0]["msg"] == (
        "Value error, a tool choice names its tool: the name is empty"
    )
    with pytest.raises(ValueError, match=r"^tools\[0\]\.function\.name: a tool needs a name"):
        ChatRequest.from_openai(
            "m",
            [{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": ""}}],
        )


# 10. NaN and infinity where JSON goes


def test_nan_and_infinity_are_refused_naming_the_field_and_the_place() -> None:
    """JSON has no form for them: they went out as `NaN` and `Infinity` (a 400), and the
    JSON form wrote them as `null`."""
    tail = (
        "which JSON has no form for (a provider answers 400): give a finite number there, "
        "or leave it out"
    )
    bounded = {"type": "object", "properties": {"x/y": {"maximum": float("inf")}}}
    with pytest.raises(ValidationError) as invalid:
        allama.ToolDefinition(name="f", parameters=bounded)
    assert invalid.value.errors()[0]["msg"] == (
        f"Value error, `parameters` holds infinity at `/properties/x~1y/maximum`, {tail}"
    )
    with pytest.raises(ValidationError) as invalid:
        allama.ResponseFormat.for_schema({"enum": [1.0, float("-inf")]})
    assert invalid.value.errors()[0]["msg"] == (
        f"Value error, `json_schema` holds infinity at `/enum/1`, {tail}"
    )
    with pytest.raises(ValueError) as raised:
        ChatRequest("m").with_option_json("openai_compat", {"logit_bias": {"50256": float("nan")}})
    assert str(raised.value) == (
        f"`options['openai_compat']` holds NaN at `/logit_bias/50256`, {tail}"
    )
    with pytest.raises(ValidationError) as invalid:
        ChatRequest("m", options={"demo": float("nan")})
    assert invalid.value.errors()[0]["msg"] == (
        f"Value error, `options['demo']` holds NaN at `/`, {tail}"
    )
    with pytest.raises(ValueError) as raised:
        ToolCall.of("c", "f", {"x": [float("nan")]})
    assert str(raised.value) == f"`arguments` holds NaN at `/x/0`, {tail}"
    # Read from JSON, which pydantic reads `NaN` and `Infinity` in.
    with pytest.raises(ValidationError):
        ChatRequest.from_json('{"model": "m", "options": {"demo": {"t": NaN}}}')
