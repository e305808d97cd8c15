"""Mistakes a new user makes in the first hour, each refused where it is made with a message
that says what to write instead: a local path as an image's URL, text as a part's bytes,
OpenAI-style messages, a flag or text for a number, an instance for the type to extract, a
misspelt provider option."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import allama
from allama import ChatRequest, DocumentPart, ImagePart
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
        "chat_template, context, credentials, endpoint, engine, headers, location, model, "
        "parallel, project, threads, timeout, tracer_provider, transport"
    )
    with pytest.raises(TypeError, match=r"^allama.provider\('local'\) has no option 'apikey'"):
        allama.provider("local", apikey="k")  # type: ignore[call-overload]
