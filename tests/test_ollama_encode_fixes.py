"""Ollama's `think`, images and documents, as sent: `reasoning_effort="none"` on gpt-oss
(which cannot stop reasoning), a body option's own `think` in place of allama's, image data
URLs whose scheme or `base64` marker are not lower-case, and plain-text documents read as
Anthropic's encoder reads them (media type parameters, charset, data URLs); and a request
with no messages, refused before sending."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import Recorder, provider

import allama
from allama import ChatRequest
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import (
    DocumentPart,
    FieldSubject,
    ImagePart,
    RequestField,
    TextPart,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    WarningKind,
)

ANSWER: dict[str, Any] = {
    "model": "m",
    "created_at": "2025-01-01T00:00:00Z",
    "message": {"role": "assistant", "content": "hi"},
    "done": True,
    "done_reason": "stop",
}
EFFORT = FieldSubject(field=RequestField.REASONING_EFFORT)
PNG = b"\x89PNG\r\n\x1a\nabc"
PNG_B64 = base64.b64encode(PNG).decode()


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def chat(request: ChatRequest) -> tuple[dict[str, Any], list[tuple[Any, WarningKind, str]]]:
    """The body a local endpoint received, and the response's warnings."""
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    response = target.chat(request)
    assert len(recorder.bodies) == 1
    return recorder.bodies[0], [(w.subject, w.kind, w.message) for w in response.warnings]


def refused(request: ChatRequest) -> tuple[UnsupportedError, Recorder]:
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    return caught.value, recorder


# `none` on a family that takes levels


@pytest.mark.parametrize("model", ["gpt-oss:20b", "gpt-oss:120b-cloud"])
def test_none_on_gpt_oss_sends_the_lowest_level_with_a_warning(model: str) -> None:
    """gpt-oss ignores `think: false` (Ollama's documentation: its trace "cannot be fully
    disabled"): `false` would leave it at its default, `medium`, without a word."""
    request = ChatRequest(model).user("hi").with_reasoning_effort("none")
    body, warnings = chat(request)
    assert body["think"] == "low"
    assert warnings == [
        (
            EFFORT,
            WarningKind.UNSUPPORTED,
            f"`{model}` on Ollama cannot turn thinking off (it reasons whatever `think` "
            "says); its lowest level, `low`, was sent",
        )
    ]


def test_none_on_gpt_oss_is_refused_under_error_before_anything_is_sent() -> None:
    request = ChatRequest("gpt-oss:20b").user("hi").with_reasoning_effort("none")
    error, recorder = refused(request)
    assert error.field is RequestField.REASONING_EFFORT
    assert error.stage is UnsupportedStage.BEFORE_SENDING
    # Nothing went, and the words claim nothing was sent.
    assert error.message == (
        "cannot send `reasoning_effort`: `gpt-oss:20b` on Ollama cannot turn thinking off "
        "(it reasons whatever `think` says)"
    )
    assert recorder.bodies == []


def test_none_elsewhere_is_still_think_false_without_a_word() -> None:
    body, warnings = chat(ChatRequest("qwen3:8b").user("hi").with_reasoning_effort("none"))
    assert body["think"] is False and warnings == []


# A body option's own `think`


def test_the_options_think_replaces_the_effort_and_says_so_not_the_level_mapping() -> None:
    request = (ChatRequest("qwen3").user("x").with_reasoning_effort("low")).with_option_json(
        "ollama", {"think": False}
    )
    body, warnings = chat(request)
    assert body["think"] is False
    assert warnings == [
        (
            EFFORT,
            WarningKind.UNSUPPORTED,
            "`think` of the body option `ollama` (false) was sent in place of the request's "
            "reasoning effort (`low`), which was not sent",
        )
    ]


def test_the_options_think_replaces_a_gpt_oss_level_and_a_refused_none() -> None:
    minimal = (
        ChatRequest("gpt-oss:20b").user("x").with_reasoning_effort("minimal")
    ).with_option_json("ollama", {"think": "high"})
    body, warnings = chat(minimal)
    assert body["think"] == "high"
    assert warnings == [
        (
            EFFORT,
            WarningKind.UNSUPPORTED,
            '`think` of the body option `ollama` ("high") was sent in place of the '
            "request's reasoning effort (`minimal`), which was not sent",
        )
    ]
    # The option's `think` is what goes, so `none` is not refused under ERROR: the
    # replacement is said, as a body option's `format` in place of the response format is.
    none = (
        ChatRequest("gpt-oss:20b")
        .user("x")
        .with_reasoning_effort("none")
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    ).with_option_json("ollama", {"think": "medium"})
    body, warnings = chat(none)
    assert body["think"] == "medium"
    assert warnings == [
        (
            EFFORT,
            WarningKind.UNSUPPORTED,
            '`think` of the body option `ollama` ("medium") was sent in place of the '
            "request's reasoning effort (`none`), which was not sent",
        )
    ]


def test_the_options_think_equal_to_allamas_keeps_allamas_words() -> None:
    """The option sends what allama would have: the level mapping is what went."""
    request = (ChatRequest("qwen3").user("x").with_reasoning_effort("low")).with_option_json(
        "ollama", {"think": True}
    )
    body, warnings = chat(request)
    assert body["think"] is True
    assert warnings == [
        (
            EFFORT,
            WarningKind.APPROXIMATED,
            "`qwen3` on Ollama turns thinking on or off, without a level; `think: true` was "
            "sent for `low`",
        )
    ]
    # Without a reasoning effort the option's `think` replaces nothing.
    plain = ChatRequest("qwen3").user("x").with_option_json("ollama", {"think": "low"})
    body, warnings = chat(plain)
    assert body["think"] == "low" and warnings == []


# Image data URLs


@pytest.mark.parametrize(
    "url",
    [
        f"DATA:image/png;BASE64,{PNG_B64}",
        f"Data:image/png;Base64,{PNG_B64}",
        f"data:image/png;base64,{PNG_B64}",
    ],
)
def test_a_data_url_is_read_whatever_the_case_of_its_scheme_and_marker(url: str) -> None:
    """RFC 2397's scheme and `base64` marker are case-insensitive."""
    message = UserMessage(content=(TextPart(text="a"), ImagePart(url=url)))
    body, warnings = chat(ChatRequest("llava", messages=(message,)))
    assert body["messages"] == [{"role": "user", "content": "a", "images": [PNG_B64]}]
    assert warnings == []


def test_an_upper_case_data_url_without_base64_is_invalid_not_left_out() -> None:
    message = UserMessage(content=(ImagePart(url="DATA:image/png,abc"),))
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("llava", messages=(message,)))
    assert "an image data URL must be base64-encoded" in str(caught.value)
    assert recorder.bodies == []


def test_an_image_url_is_still_left_out_with_a_warning() -> None:
    message = UserMessage(
        content=(TextPart(text="a"), ImagePart(url="HTTPS://example.com/data:x.png"))
    )
    body, warnings = chat(ChatRequest("llava", messages=(message,)))
    assert body["messages"] == [{"role": "user", "content": "a"}]
    assert warnings == [
        (
            FieldSubject(field=RequestField.IMAGES),
            WarningKind.UNSUPPORTED,
            "Ollama takes images only as their bytes, not by URL; the image was left out",
        )
    ]


# Plain-text documents


def _text(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


@pytest.mark.parametrize(
    "document",
    [
        DocumentPart(data=b"notes", media_type="text/plain; charset=utf-8"),
        DocumentPart(data=b"notes", media_type="Text/Plain"),
        DocumentPart(url=f"data:text/plain;base64,{_text('notes')}"),
        DocumentPart(url="DATA:TEXT/PLAIN;charset=utf-8;BASE64,bm90\n ZXM="),  # wrapped
        DocumentPart(url=f"data:;base64,{_text('notes')}"),  # RFC 2397: text/plain
        DocumentPart(url=f"data:;base64,{_text('notes')}", media_type="text/plain"),
        DocumentPart(url="data:text/plain,notes"),  # not marked base64: its text
        DocumentPart(url="data:,n%6Ftes"),  # percent-encoded, RFC 2397's text/plain
    ],
)
def test_a_plain_text_document_goes_as_text_whatever_its_media_type_says(
    document: DocumentPart,
) -> None:
    body, warnings = chat(ChatRequest("llama3.2").user("Summarise", document))
    assert body["messages"] == [{"role": "user", "content": "Summarise\n\nnotes"}]
    assert warnings == []


def test_a_plain_text_document_is_read_in_its_charset() -> None:
    document = DocumentPart(
        data="café".encode("latin-1"), media_type="text/plain; charset=ISO-8859-1"
    )
    body, warnings = chat(ChatRequest("llama3.2").user("x", document))
    assert (body["messages"][0]["content"], warnings) == ("x\n\ncafé", [])
    wrong = DocumentPart(data=b"\xff\xfe\xfa", media_type='text/plain; charset="utf-16-le"')
    with pytest.raises(InvalidRequestError) as refused:
        chat(ChatRequest("llama3.2").user("x", wrong))
    assert str(refused.value) == "a text/plain document must be text in its charset (utf-16-le)"


def test_a_document_data_url_of_another_type_and_a_document_url_are_left_out() -> None:
    request = ChatRequest("llama3.2").user(
        "x",
        DocumentPart(url="data:application/pdf;base64,JVBERg==", media_type="text/plain"),
        DocumentPart(url="https://example.com/data:text/plain;base64,eA=="),
    )
    body, warnings = chat(request)
    assert body["messages"] == [{"role": "user", "content": "x"}]
    assert [message for _, _, message in warnings] == [
        "Ollama takes plain-text documents only, not application/pdf; it was left out",
        "Ollama takes no document by URL, only plain text given as bytes or in a data URL; it "
        "was left out",
    ]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        (
            DocumentPart(url="data:text/plain;base64,no!!"),
            "the document's data URL holds no valid base64",
        ),
        (
            DocumentPart(data=b"notes", media_type="text/plain; charset=x-unknown"),
            "a text/plain document names charset x-unknown, which allama cannot read",
        ),
    ],
)
def test_a_document_allama_cannot_read_is_invalid_before_sending(
    document: DocumentPart, error: str
) -> None:
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("llama3.2").user("x", document))
    assert str(caught.value) == error
    assert recorder.bodies == []


# Images checked as Anthropic's encoder checks them


def test_an_image_data_url_goes_without_whitespace_and_as_valid_base64() -> None:
    """Ollama reads `images` as base64 alone ("illegal base64 data at input byte ...")."""
    wrapped = f"data:image/png;base64,{PNG_B64[:5]}\n {PNG_B64[5:]}"
    body, warnings = chat(ChatRequest("llava").user("a", ImagePart(url=wrapped)))
    assert body["messages"] == [{"role": "user", "content": "a", "images": [PNG_B64]}]
    assert warnings == []
    # Its padding left out, as browsers read a data URL: sent with it (Go's decoder needs it).
    unpadded = f"data:image/png;base64,{PNG_B64.rstrip('=')}"
    body, _ = chat(ChatRequest("llava").user("a", ImagePart(url=unpadded)))
    assert body["messages"][0]["images"] == [PNG_B64]
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("llava").user("a", ImagePart(url="data:image/png;base64,no!!")))
    assert str(caught.value) == "the image's data URL holds no valid base64"
    assert recorder.bodies == []


@pytest.mark.parametrize(
    "image",
    [ImagePart(url="data:image/png;base64,")],
)
def test_an_image_of_no_data_is_refused_before_sending(image: ImagePart) -> None:
    target, recorder = provider("ollama", (200, ANSWER), base_url="http://127.0.0.1:9")
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("llava").user("a", image))
    assert str(caught.value) == "the image holds no data, which Ollama cannot read"
    assert recorder.bodies == []


# A request with no messages


class City(BaseModel):
    city: str


@pytest.mark.parametrize("how", ["chat", "stream", "extract"])
def test_a_request_with_no_messages_is_refused_before_sending(how: str) -> None:
    """Ollama answers `messages: []` by loading the model alone (`done_reason: "load"`),
    which was read as an answer with no text."""
    loaded = {**ANSWER, "message": {"role": "assistant", "content": ""}, "done_reason": "load"}
    target, recorder = provider("ollama", (200, loaded), base_url="http://127.0.0.1:9")
    request = ChatRequest("llama3.2")
    with pytest.raises(InvalidRequestError) as caught:
        if how == "chat":
            target.chat(request)
        elif how == "stream":
            with target.chat_stream(request) as stream:
                for _ in stream:
                    pass
        else:
            allama.extract(target, City, request)
    assert str(caught.value) == (
        "Ollama needs at least one message, and the request has none left to send"
    )
    assert caught.value.provider == "ollama"
    assert recorder.bodies == []


def test_system_instructions_alone_are_sent() -> None:
    body, warnings = chat(ChatRequest("llama3.2").system("Say hi."))
    assert body["messages"] == [{"role": "system", "content": "Say hi."}]
    assert warnings == []
